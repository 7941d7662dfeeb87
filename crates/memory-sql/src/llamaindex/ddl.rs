//! Names and DDL of LlamaIndex's `SQLAlchemyChatStore` table, as SQLAlchemy 2 compiles them.
//!
//! The table and its three indexes are created with the statements `metadata.create_all` runs
//! (llama-index-core 0.14, SQLAlchemy 2.1): on SQLite, byte for byte, so `sqlite_master` holds
//! the same text whoever created the table; on PostgreSQL, the same statements with the table
//! name always quoted (PostgreSQL keeps no DDL text, and a quoted lower-case name is the same
//! name).

use md5::{Digest, Md5};
use memory_core::{Error, Result};

use crate::dialect::Backend;

/// The longest identifier PostgreSQL keeps (SQLAlchemy's `max_identifier_length` for it).
const PG_MAX_IDENTIFIER: usize = 63;

/// SQLAlchemy's reserved words for SQLite (`SQLiteIdentifierPreparer.reserved_words`): a table
/// named after one is quoted in the DDL.
const SQLITE_RESERVED: [&str; 117] = [
    "add",
    "after",
    "all",
    "alter",
    "analyze",
    "and",
    "as",
    "asc",
    "attach",
    "autoincrement",
    "before",
    "begin",
    "between",
    "by",
    "cascade",
    "case",
    "cast",
    "check",
    "collate",
    "column",
    "commit",
    "conflict",
    "constraint",
    "create",
    "cross",
    "current_date",
    "current_time",
    "current_timestamp",
    "database",
    "default",
    "deferrable",
    "deferred",
    "delete",
    "desc",
    "detach",
    "distinct",
    "drop",
    "each",
    "else",
    "end",
    "escape",
    "except",
    "exclusive",
    "exists",
    "explain",
    "fail",
    "false",
    "for",
    "foreign",
    "from",
    "full",
    "glob",
    "group",
    "having",
    "if",
    "ignore",
    "immediate",
    "in",
    "index",
    "indexed",
    "initially",
    "inner",
    "insert",
    "instead",
    "intersect",
    "into",
    "is",
    "isnull",
    "join",
    "key",
    "left",
    "like",
    "limit",
    "match",
    "natural",
    "not",
    "notnull",
    "null",
    "of",
    "offset",
    "on",
    "or",
    "order",
    "outer",
    "plan",
    "pragma",
    "primary",
    "query",
    "raise",
    "references",
    "reindex",
    "rename",
    "replace",
    "restrict",
    "right",
    "rollback",
    "row",
    "select",
    "set",
    "table",
    "temp",
    "temporary",
    "then",
    "to",
    "transaction",
    "trigger",
    "true",
    "union",
    "unique",
    "update",
    "using",
    "vacuum",
    "values",
    "view",
    "virtual",
    "when",
    "where",
];

/// Checks a table or schema name: LlamaIndex's `table_name` rules as this store takes them,
/// `[A-Za-z_][A-Za-z0-9_]*`, 1 to `max` characters. Names are placed in SQL quoted, and only
/// names of this form are accepted, so none can inject SQL.
pub(super) fn validate_name(what: &str, name: &str, max: usize) -> Result<()> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !first_ok || !rest_ok || name.len() > max {
        return Err(Error::invalid_input(format!(
            "invalid {what} {name:?}: use 1 to {max} characters of [A-Za-z0-9_], \
             not starting with a digit"
        )));
    }
    Ok(())
}

/// A validated name, always quoted (how every statement but SQLite's DDL names things).
pub(super) fn quoted(name: &str) -> String {
    format!("\"{name}\"")
}

/// A validated name as SQLAlchemy writes it for SQLite: quoted when it holds an upper-case
/// letter or is a reserved word, bare otherwise.
fn sqlalchemy_sqlite_name(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    if lower != name || SQLITE_RESERVED.contains(&lower.as_str()) {
        quoted(name)
    } else {
        name.to_owned()
    }
}

/// The name SQLAlchemy gives the index of `column` (`index=True`): `ix_<table>_<column>`, or
/// `ix_<schema>_<table>_<column>` for a table in a schema (SQLAlchemy's column label names the
/// schema), on PostgreSQL cut to 63 characters as SQLAlchemy cuts it (the first 55, `_`, and
/// the last four hex digits of the MD5 of the whole name).
pub(super) fn index_name(
    backend: Backend,
    schema: Option<&str>,
    table: &str,
    column: &str,
) -> String {
    let name = match schema {
        Some(schema) => format!("ix_{schema}_{table}_{column}"),
        None => format!("ix_{table}_{column}"),
    };
    if backend == Backend::Postgres && name.len() > PG_MAX_IDENTIFIER {
        let digest = Md5::digest(name.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        let head = name.get(..PG_MAX_IDENTIFIER - 8).unwrap_or(&name);
        let tail = hex.get(hex.len().saturating_sub(4)..).unwrap_or(&hex);
        return format!("{head}_{tail}");
    }
    name
}

/// The statements that create the table and its indexes when they are missing. `table_sql` is
/// the table as statements name it (quoted, with its schema on PostgreSQL); `schema` is the
/// PostgreSQL schema to create first, if any. The three `CREATE INDEX` statements come last.
pub(super) fn create_statements(
    backend: Backend,
    table: &str,
    table_sql: &str,
    schema: Option<&str>,
) -> Vec<String> {
    let mut out = Vec::new();
    let (table_ddl, id_type, key_col, columns) = match backend {
        Backend::Postgres => {
            if let Some(schema) = schema {
                out.push(format!("CREATE SCHEMA IF NOT EXISTS {}", quoted(schema)));
            }
            (
                table_sql.to_owned(),
                "SERIAL",
                "key",
                ["key", "status", "timestamp"],
            )
        }
        _ => (
            sqlalchemy_sqlite_name(table),
            "INTEGER",
            "\"key\"",
            ["\"key\"", "status", "timestamp"],
        ),
    };
    out.push(format!(
        "CREATE TABLE IF NOT EXISTS {table_ddl} (\n\tid {id_type} NOT NULL, \n\t{key_col} VARCHAR \
         NOT NULL, \n\ttimestamp BIGINT NOT NULL, \n\trole VARCHAR NOT NULL, \n\tstatus VARCHAR \
         NOT NULL, \n\tdata JSON NOT NULL, \n\tPRIMARY KEY (id)\n)"
    ));
    for (column, column_sql) in ["key", "status", "timestamp"].into_iter().zip(columns) {
        let index = index_name(backend, schema, table, column);
        let index_sql = match backend {
            Backend::Postgres => quoted(&index),
            _ => sqlalchemy_sqlite_name(&index),
        };
        out.push(format!(
            "CREATE INDEX IF NOT EXISTS {index_sql} ON {table_ddl} ({column_sql})"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated() {
        for ok in ["llama_index_memory", "_x", "MyMem", "a1", &"a".repeat(63)] {
            assert!(validate_name("table name", ok, 63).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "1a",
            "a-b",
            "a b",
            "a;drop table x",
            "a\"b",
            "ä",
            &"a".repeat(64),
        ] {
            assert!(validate_name("table name", bad, 63).is_err(), "{bad}");
        }
    }

    #[test]
    fn index_names_follow_sqlalchemy() {
        assert_eq!(
            index_name(Backend::Postgres, None, "llama_index_memory", "timestamp"),
            "ix_llama_index_memory_timestamp"
        );
        // Computed by SQLAlchemy 2.1.9 for a 63-character table name.
        let long = "a".repeat(63);
        assert_eq!(
            index_name(Backend::Postgres, None, &long, "key"),
            format!("ix_{}_11f6", "a".repeat(52))
        );
        assert_eq!(
            index_name(Backend::Postgres, None, &long, "status"),
            format!("ix_{}_8abb", "a".repeat(52))
        );
        assert_eq!(
            index_name(Backend::Postgres, None, &long, "timestamp"),
            format!("ix_{}_5f22", "a".repeat(52))
        );
        assert_eq!(
            index_name(Backend::Sqlite, None, &long, "key"),
            format!("ix_{long}_key")
        );
    }

    /// The names SQLAlchemy 2.1.9 gave the indexes of llama-index-core 0.14.25's table in a
    /// PostgreSQL schema (`db_schema`), two of them cut by its MD5 rule
    /// (docs/interop/vectors/llamaindex_rows.json).
    #[test]
    fn schema_index_names_are_sqlalchemys() {
        let vectors: serde_json::Value = serde_json::from_str(include_str!(
            "../../../../docs/interop/vectors/llamaindex_rows.json"
        ))
        .unwrap();
        let pairs = vectors["postgres_schema_indexes"].as_array().unwrap();
        assert_eq!(pairs.len(), 3);
        for pair in pairs {
            let schema = pair["schema"].as_str().unwrap();
            let table = pair["table"].as_str().unwrap();
            let written: Vec<&str> = pair["indexes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["name"].as_str().unwrap())
                .filter(|n| n.starts_with("ix_"))
                .collect();
            let mut ours: Vec<String> = ["key", "status", "timestamp"]
                .iter()
                .map(|c| index_name(Backend::Postgres, Some(schema), table, c))
                .collect();
            ours.sort();
            assert_eq!(ours, written, "{schema}.{table}");
        }
        // And a 63-character table in a schema (captured from llama-index-core 0.14.25).
        let a63 = "a".repeat(63);
        let a44 = "a".repeat(44);
        for (column, suffix) in [("key", "a6f6"), ("status", "a931"), ("timestamp", "8344")] {
            assert_eq!(
                index_name(Backend::Postgres, Some("li_long"), &a63, column),
                format!("ix_li_long_{a44}_{suffix}")
            );
        }
    }

    #[test]
    fn sqlite_ddl_is_sqlalchemys() {
        let ddl = create_statements(Backend::Sqlite, "MyMem", "\"MyMem\"", None);
        assert_eq!(
            ddl,
            [
                "CREATE TABLE IF NOT EXISTS \"MyMem\" (\n\tid INTEGER NOT NULL, \n\t\"key\" VARCHAR NOT NULL, \n\ttimestamp BIGINT NOT NULL, \n\trole VARCHAR NOT NULL, \n\tstatus VARCHAR NOT NULL, \n\tdata JSON NOT NULL, \n\tPRIMARY KEY (id)\n)",
                "CREATE INDEX IF NOT EXISTS \"ix_MyMem_key\" ON \"MyMem\" (\"key\")",
                "CREATE INDEX IF NOT EXISTS \"ix_MyMem_status\" ON \"MyMem\" (status)",
                "CREATE INDEX IF NOT EXISTS \"ix_MyMem_timestamp\" ON \"MyMem\" (timestamp)",
            ]
        );
        let reserved = create_statements(Backend::Sqlite, "select", "\"select\"", None);
        assert!(reserved[1].ends_with("ix_select_key ON \"select\" (\"key\")"));
    }
}
