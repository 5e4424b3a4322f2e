"""The service's settings: where it listens, its limits and their defaults. Built once at the edge (the
`macupos serve` options) and passed down as typed values."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from service.web.settings import WebSettings

__all__ = ["MB", "OWNER_ONLY_UMASK", "Limits", "ServiceSettings", "WebhookSettings"]

MB = 1024 * 1024
# Every folder and file `macupos serve` makes (service.db and its keys, tenant homes, SQLite databases and
# their -wal/-shm, handoffs, spool) is its owner's alone, whatever a code path's own mkdir or open asks and
# without relying on the systemd unit's UMask: a tenant's memory is no business of other local users.
OWNER_ONLY_UMASK = 0o077


@dataclass(frozen=True, slots=True)
class Limits:
    """Body and head caps (bytes, after gunzip), per-key rate limits, deadlines; docs/service.md lists them."""

    transcript_bytes: int = 50 * MB
    handoff_bytes: int = 1 * MB
    json_bytes: int = 256 * 1024  # POST /v1/script and /v1/register
    mcp_bytes: int = 4 * MB
    rate_per_s: float = 50.0  # per key, sustained; 0 turns the limit off
    rate_burst: int = 100
    register_per_hour: int = 10  # POST /v1/register per client address
    register_global_per_hour: int = 100
    request_timeout_s: float = 30.0
    upload_timeout_s: float = 300.0  # a 50 MB transcript: its body, its parse and its handoffs
    max_open_tenants: int = 32  # tenants whose databases stay open (least recently used closed first)
    handoffs_page_max: int = 500
    # Transcript bytes being ingested at once, all tenants together (service/ingest_budget.py): an ingest
    # takes a few times its file's size in memory; past this an upload is answered 503. 0: no budget.
    ingest_budget_bytes: int = 64 * MB  # one 45 MB upload at a time, with smaller ones beside it
    # Smaller uploads are ingested on a thread of the server, larger ones in a child process: a child's start
    # and pipes would cost a small one more (1 MB: 0.06 s against 0.1-0.3 s) than its GIL share costs others.
    ingest_in_process_bytes: int = 4 * MB
    # The request head (request line and header fields), checked below the app (memory/remote/http_limits.py):
    # past this size a 431, and a connection whose head takes longer than this is closed (slowloris).
    header_bytes: int = 64 * 1024
    head_timeout_s: float = 10.0
    # GET /mcp event streams: open at once per key (more are answered 429), and how long one stays open
    # before it is ended (clients reconnect); each holds its tenant open while it lasts.
    mcp_streams_per_key: int = 4
    mcp_stream_s: float = 900.0


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    """Tenants' webhooks (service/webhooks): which addresses may be registered, and the retry schedule."""

    # https only, but for plain http to this machine (127.0.0.1, ::1, localhost); True allows http anywhere
    # (a receiver inside a private network, say): a delivery's body and signature would then cross in clear.
    allow_http: bool = False
    attempts: int = 12  # tries per delivery before it is marked failed
    backoff_s: float = 1.0  # the wait after the first failed try, doubled after each next one …
    backoff_max_s: float = 600.0  # … up to this: 12 tries span about 27 minutes
    timeout_s: float = 10.0  # one try: connect, send, and the receiver's answer
    poll_s: float = 2.0  # how often the deliverer looks for due retries (and, on PostgreSQL, other servers' events)
    concurrency: int = 8  # tries in flight at once
    per_tenant: int = 20  # webhooks a tenant may have
    keep_days: float = 30.0  # delivered and failed entries of the delivery log older than this are pruned


@dataclass(frozen=True, slots=True)
class ServiceSettings:
    home: Path  # $MACUPOS_HOME: service.db and tenants/<tenant>/
    host: str = "127.0.0.1"
    port: int = 8750
    certfile: Path | None = None
    keyfile: Path | None = None
    allow_register: bool = False
    use_llm: bool = False  # handoffs by the deterministic extractor unless the owner turns the LLM on
    cors_origins: tuple[str, ...] = ()  # CORS is off unless origins are named
    forwarded_allow_ips: str = "127.0.0.1"  # proxies whose X-Forwarded-For is believed
    limits: Limits = field(default_factory=Limits)
    # PostgreSQL (service/pg) instead of a SQLite file per tenant; "" keeps the embedded store. The URL may
    # hold a password: never in a repr, a log line or an error.
    database_url: str = field(default="", repr=False)
    database_pool: int = 16  # connections per process, at most
    database_timeout_s: float = 30.0  # each statement's bound
    web: WebSettings = field(default_factory=WebSettings)  # the pages (service/web), on by default
    webhooks: WebhookSettings = field(default_factory=WebhookSettings)

    @property
    def db_path(self) -> Path:
        return self.home / "service.db"

    @property
    def tenants_dir(self) -> Path:
        return self.home / "tenants"
