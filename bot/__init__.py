"""The Telegram front and the composition root of Macupos."""
