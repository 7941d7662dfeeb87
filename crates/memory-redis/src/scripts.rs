//! The Lua scripts: each multi-key step of the stores runs as one script, so it is atomic and
//! one round trip. Sources are in `src/lua/` (those of `AfRedisHistory`,
//! feature `agent-framework`, start with `af_`; those of `RedisVectorStore` with `vector_`);
//! every script starts with `prelude.lua`.

use std::sync::LazyLock;

/// One script: its source and SHA-1 (for `EVALSHA`).
pub(crate) struct LuaScript {
    pub(crate) name: &'static str,
    pub(crate) source: &'static str,
    pub(crate) sha1: String,
}

impl LuaScript {
    fn new(name: &'static str, source: &'static str) -> Self {
        Self {
            name,
            source,
            sha1: redis::Script::new(source).get_hash().to_owned(),
        }
    }
}

macro_rules! lua {
    ($name:literal) => {
        LuaScript::new(
            $name,
            concat!(
                include_str!("lua/prelude.lua"),
                "\n",
                include_str!(concat!("lua/", $name, ".lua"))
            ),
        )
    };
}

/// Every script of the stores.
pub(crate) struct Scripts {
    pub(crate) append: LuaScript,
    pub(crate) read: LuaScript,
    pub(crate) read_since: LuaScript,
    pub(crate) archive: LuaScript,
    pub(crate) clear: LuaScript,
    pub(crate) set_ttl: LuaScript,
    pub(crate) save_session: LuaScript,
    pub(crate) delete_session: LuaScript,
    pub(crate) purge: LuaScript,
    pub(crate) vector_dims: LuaScript,
    pub(crate) vector_upsert: LuaScript,
    pub(crate) vector_get: LuaScript,
    pub(crate) vector_delete: LuaScript,
    pub(crate) vector_purge: LuaScript,
    #[cfg(feature = "agent-framework")]
    pub(crate) af_append: LuaScript,
    #[cfg(feature = "agent-framework")]
    pub(crate) af_read: LuaScript,
    #[cfg(feature = "agent-framework")]
    pub(crate) af_clear: LuaScript,
    #[cfg(feature = "agent-framework")]
    pub(crate) af_set_ttl: LuaScript,
}

/// The scripts, hashed once per process.
pub(crate) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    append: lua!("append"),
    read: lua!("read"),
    read_since: lua!("read_since"),
    archive: lua!("archive"),
    clear: lua!("clear"),
    set_ttl: lua!("set_ttl"),
    save_session: lua!("save_session"),
    delete_session: lua!("delete_session"),
    purge: lua!("purge"),
    vector_dims: lua!("vector_dims"),
    vector_upsert: lua!("vector_upsert"),
    vector_get: lua!("vector_get"),
    vector_delete: lua!("vector_delete"),
    vector_purge: lua!("vector_purge"),
    #[cfg(feature = "agent-framework")]
    af_append: lua!("af_append"),
    #[cfg(feature = "agent-framework")]
    af_read: lua!("af_read"),
    #[cfg(feature = "agent-framework")]
    af_clear: lua!("af_clear"),
    #[cfg(feature = "agent-framework")]
    af_set_ttl: lua!("af_set_ttl"),
});
