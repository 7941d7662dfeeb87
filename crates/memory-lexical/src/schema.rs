//! The index schema: one tantivy index holds every scope's documents, each tagged with its
//! scope (whole, and by part for deleting by forget filter).

use memory_core::Scope;
use memory_core::TextDocument;
use tantivy::TantivyDocument;
use tantivy::schema::{
    Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};
use uuid::Uuid;

/// What an absent user or agent is indexed as (`~` cannot occur in an id, as in
/// [`Scope::key`]).
const ABSENT: &str = "~";

/// The fields of the schema.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fields {
    /// The document's key: its id and its scope's key (unique in the index).
    pub key: Field,
    /// The scope's key ([`Scope::key`]).
    pub scope: Field,
    /// The scope's tenant.
    pub tenant: Field,
    /// The scope's user, or [`ABSENT`].
    pub user: Field,
    /// The scope's agent, or [`ABSENT`].
    pub agent: Field,
    /// The scope's session.
    pub session: Field,
    /// The document's id (stored).
    pub id: Field,
    /// The text: analyzed, with frequencies for BM25, stored.
    pub text: Field,
    /// The payload as JSON (stored only).
    pub payload: Field,
}

impl Fields {
    /// The schema of an index whose texts are cut into words by the analyzer named
    /// `analyzer`, and its fields.
    pub(crate) fn schema(analyzer: &str) -> (Schema, Self) {
        let mut builder = Schema::builder();
        let text_options = TextOptions::default()
            .set_indexing_options(
                TextFieldIndexing::default()
                    .set_tokenizer(analyzer)
                    .set_index_option(IndexRecordOption::WithFreqs),
            )
            .set_stored();
        let fields = Self {
            key: builder.add_text_field("key", STRING),
            scope: builder.add_text_field("scope", STRING),
            tenant: builder.add_text_field("tenant", STRING),
            user: builder.add_text_field("user", STRING),
            agent: builder.add_text_field("agent", STRING),
            session: builder.add_text_field("session", STRING),
            id: builder.add_text_field("id", STORED),
            text: builder.add_text_field("text", text_options),
            payload: builder.add_text_field("payload", STORED),
        };
        (builder.build(), fields)
    }

    /// The tantivy document of `document` in `scope`.
    pub(crate) fn document(&self, scope: &Scope, document: &TextDocument) -> TantivyDocument {
        let mut doc = TantivyDocument::default();
        doc.add_text(self.key, document_key(scope, document.id));
        doc.add_text(self.scope, scope.key());
        doc.add_text(self.tenant, scope.tenant().as_str());
        doc.add_text(self.user, scope.user().map_or(ABSENT, |u| u.as_str()));
        doc.add_text(self.agent, scope.agent().map_or(ABSENT, |a| a.as_str()));
        doc.add_text(self.session, scope.session_id().as_str());
        doc.add_text(self.id, document.id.to_string());
        doc.add_text(self.text, &document.text);
        doc.add_text(
            self.payload,
            serde_json::Value::Object(document.payload.clone()).to_string(),
        );
        doc
    }
}

/// The key of the document `id` of `scope`: unique in the index (an id is 36 characters, so
/// the scope key that follows it is unambiguous).
pub(crate) fn document_key(scope: &Scope, id: Uuid) -> String {
    format!("{id}|{}", scope.key())
}
