//! [`give_back_freed_memory`]: memory a long-running process freed goes
//! back to the system, for servers that hold many short-lived sessions
//! (`mcp serve --http`, the Telegram bot's chats).

/// Returns the memory freed since the last call to the system. glibc's
/// allocator keeps freed memory in its arenas: after 10,000 abandoned MCP
/// sessions expired, `mcp serve --http` stayed at twice its starting size
/// without this (`bench/mcp-http-flood.py --settle`). Elsewhere (musl, other
/// systems) it does nothing.
pub fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it
    // takes no pointer and may be called from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
