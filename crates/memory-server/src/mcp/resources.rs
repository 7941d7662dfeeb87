//! The resources: the template `thread://{session}` and each listed thread, a thread's
//! history as JSON.

use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};
use rmcp::service::RequestContext;
use serde_json::json;

use super::MemoryMcp;
use super::uri::{parse_thread_uri, thread_uri};
use crate::error::{ErrorCode, OpError};
use crate::ops::{ListRequest, WindowSpec};

fn resource_error(error: OpError) -> ErrorData {
    let message = error.to_string();
    match error.code {
        ErrorCode::NotFound => ErrorData::resource_not_found(message, None),
        ErrorCode::InvalidInput | ErrorCode::Forbidden | ErrorCode::LimitExceeded => {
            ErrorData::invalid_params(message, None)
        }
        ErrorCode::Unauthorized => ErrorData::invalid_request(message, None),
        _ => ErrorData::internal_error(message, None),
    }
}

/// The resource templates: `thread://{session}`.
pub(super) fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new("thread://{session}", "thread")
            .with_title("A thread's history")
            .with_description("Every message of the session's thread (archived ones too, marked), in order, as JSON. Add `?user=…&agent=…&source=…` for a thread that has them.")
            .with_mime_type("application/json"),
    ])
}

impl MemoryMcp {
    /// `resources/list`: the caller's threads as `thread://` URIs, a page at a time.
    pub(super) async fn resources_list(
        &self,
        request: Option<PaginatedRequestParams>,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let who = self.principal(context).map_err(resource_error)?;
        let cursor = request.and_then(|r| r.cursor);
        let page = self
            .ops
            .list_threads(
                &who,
                ListRequest {
                    cursor,
                    ..ListRequest::default()
                },
            )
            .await
            .map_err(resource_error)?;
        let resources = page
            .items
            .iter()
            .map(|thread| {
                let source = (thread.source != agent_memory::scope::DEFAULT_SOURCE)
                    .then_some(thread.source.as_str());
                Resource::new(
                    thread_uri(
                        &thread.session,
                        thread.user.as_deref(),
                        thread.agent.as_deref(),
                        source,
                    ),
                    format!("thread {}", thread.session),
                )
                .with_mime_type("application/json")
            })
            .collect();
        let mut result = ListResourcesResult::with_all_items(resources);
        result.next_cursor = page.next_cursor;
        Ok(result)
    }

    /// `resources/read`: the thread a `thread://` URI names, every message in order.
    pub(super) async fn resource_read(
        &self,
        request: ReadResourceRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let who = self.principal(context).map_err(resource_error)?;
        let address = parse_thread_uri(&request.uri).map_err(resource_error)?;
        let messages = self
            .ops
            .read(&who, &address, WindowSpec::Everything)
            .await
            .map_err(resource_error)?;
        let body = json!({ "session": address.session, "messages": messages });
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(body.to_string(), request.uri.clone())
                .with_mime_type("application/json"),
        ])
        .into())
    }
}
