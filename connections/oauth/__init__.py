"""OAuth for connections: tokens stored encrypted, refreshed one worker at a time and revoked (tokens.py), every
exchange with an authorization server bounded and kept off our own network (http.py), and the MCP authorization
flow (mcp.py: discovery, client registration, authorization code with PKCE). See docs/howto/mcp-connections.md."""
