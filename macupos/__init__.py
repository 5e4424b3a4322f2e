"""The `macupos` command's composition root: it loads the configuration once (memory.load_config) and mounts
every package's commands (bot, memory, relay, serve). Nothing imports it; it may import everything."""
