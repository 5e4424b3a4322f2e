"""The memory service: `macupos serve`, Eywa over HTTP for many tenants (REST, MCP, metrics)."""
