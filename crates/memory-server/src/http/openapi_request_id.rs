//! The request id in the OpenAPI document: every operation takes an optional `x-request-id`
//! request header and every response carries one (see [`access`](super::access)).

use utoipa::Modify;
use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn, PathItem};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::{HeaderBuilder, RefOr, Required};

use super::access::{MAX_REQUEST_ID_LEN, REQUEST_ID_HEADER};

/// Declares `x-request-id` on every operation (an optional request header) and on every
/// response of it.
pub(super) struct RequestIdHeader;

impl Modify for RequestIdHeader {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            for operation in operations_mut(item) {
                declare_on(operation);
            }
        }
    }
}

fn declare_on(operation: &mut Operation) {
    let parameter = ParameterBuilder::new()
        .name(REQUEST_ID_HEADER)
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(format!(
            "The request's id for logs and support: used as given when it is 1 to \
             {MAX_REQUEST_ID_LEN} ASCII letters, digits, `-`, `_`, `.`, `:` or `@`, else \
             replaced by a new UUID. It is echoed in the response's `{REQUEST_ID_HEADER}`."
        )))
        // Any value is accepted (one the server cannot use is replaced, not refused), so the
        // schema sets no pattern: a client checking requests against it would refuse what the
        // server takes, and a fuzzer would expect a refusal the server never gives.
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
        .build();
    let parameters = operation.parameters.get_or_insert_with(Vec::new);
    let declared = parameters.iter().any(|p| match p {
        RefOr::T(p) => p.name.eq_ignore_ascii_case(REQUEST_ID_HEADER),
        RefOr::Ref(_) => false,
    });
    if !declared {
        parameters.push(RefOr::T(parameter));
    }
    for response in operation.responses.responses.values_mut() {
        if let RefOr::T(response) = response {
            let header = HeaderBuilder::new()
                .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                .description(Some(format!(
                    "The request's id: the request's `{REQUEST_ID_HEADER}` when it is used as \
                     given, else a new UUID."
                )))
                .build();
            response
                .headers
                .insert(REQUEST_ID_HEADER.to_owned(), RefOr::T(header));
        }
    }
}

/// Every operation of a path.
fn operations_mut(item: &mut PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        item.get.as_mut(),
        item.put.as_mut(),
        item.post.as_mut(),
        item.delete.as_mut(),
        item.options.as_mut(),
        item.head.as_mut(),
        item.patch.as_mut(),
        item.trace.as_mut(),
        item.query.as_mut(),
    ]
    .into_iter()
    .flatten()
    .chain(item.additional_operations.values_mut())
}
