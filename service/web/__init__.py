"""The web pages of the memory (`macupos serve`, `macupos serve --local`): search, sessions, review, facts,
cost and stats, server-rendered, for a phone and a desktop; Telegram's Mini App opens the same pages.
docs/web.md says what each page shows and how logging in works."""
