"""Settings from TRAINJOBS_* environment variables."""
from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TRAINJOBS_", extra="ignore")

    database_url: str = Field("sqlite:///./trainjobs.db",
                              description="SQLAlchemy URL; PostgreSQL as postgresql+psycopg://user@host/db")
    host: str = "127.0.0.1"
    port: int = 8000
    backends: list[str] = Field(default_factory=lambda: ["local"],
                                description='Enabled backends, e.g. ["local","vertex"]')
    default_backend: str = "local"
    reconcile_interval_seconds: float = 0.5
    reconcile_batch_size: int = 500
    reconcile_wake_gap_seconds: float = Field(
        0.05, ge=0, le=5, description="A submit or cancel wakes the controller at once, but a pass starts at "
                                      "least this long (or as long as that pass took) after the previous one "
                                      "ended: a burst of submits costs one pass, not one each (the launch waits "
                                      "at most that much longer)")
    run_reconciler: bool = True
    workers: int = Field(1, ge=1, le=32, description="API worker processes of `serve` on this host")
    election_interval_seconds: float = Field(
        2.0, gt=0, le=10, description="How often a process that is not the controller tries to become it "
                                      "(one controller per database; a takeover takes about this long)")
    controller_lease_seconds: float = Field(
        10.0, ge=3, le=600, description="PostgreSQL: a controller whose lock session has been silent this long "
                                        "(a partition, a vanished host) may be deposed: the next process "
                                        "terminates that session and takes over. The controller itself steps "
                                        "down when its session cannot answer within half of it")
    progress_max_bytes: int = Field(16_384, ge=1024, le=1_048_576,
                                    description="A job's stored progress (from replica output) is cut to this")
    error_max_bytes: int = Field(65_536, ge=1024, le=1_048_576,
                                 description="A job's stored error (from replicas or Google) is cut to this")
    allow_sqlite_in_container: bool = Field(
        False, description="Dockerfile.api sets TRAINJOBS_IN_CONTAINER: a SQLite file inside a container is "
                           "lost with it, so the service refuses to start on one unless this is true")
    in_container: bool = Field(False, description="Set by Dockerfile.api")
    bootstrap_token_file: Path | None = Field(
        None, description="On an empty database, write the first admin token here (mode 0600) instead of "
                          "printing it; with TRAINJOBS_BOOTSTRAP_TOKEN the token is taken from there instead")
    bootstrap_token: str | None = Field(None, description="Use this secret as the first admin token "
                                                          "(e.g. from a secret manager)")
    seed_demo_template: bool = True
    max_concurrent_requests: int = Field(
        32, ge=1, le=1000, description="Requests one process runs at once (log streams aside); the threads and "
                                       "database connections are sized from it (service/web/overload.py)")
    request_queue_seconds: float = Field(
        0.5, ge=0, le=30, description="How long a request waits for a slot before it is answered 503 "
                                      "with Retry-After")
    max_streams: int = Field(10_000, ge=1, le=100_000, description="Log streams (SSE) one process serves at once "
                             "(10,000: 10,000 followers across two workers reach one unevenly, bench/load.py; "
                             "needs as many open files)")
    stream_queue_seconds: float = Field(
        30.0, ge=0, le=120, description="How long opening a log stream waits for a request slot (it needs one "
                                        "until the stream starts) before it is answered 503 with Retry-After "
                                        "(30 s: 5,000 followers connecting at once all open, bench/load.py)")
    db_pool_timeout_seconds: float = Field(
        5.0, gt=0, le=60, description="The longest wait for a database connection; then 503")
    max_body_bytes: int = Field(1_048_576, ge=1024, description="Larger request bodies are refused with 413 "
                                "(with Content-Length, or counted as a chunked body arrives)")
    max_problems: int = Field(50, ge=1, le=1000, description="A 4xx lists at most this many problems in `errors`; "
                              "`errors_omitted` says how many more there were")
    http_max_header_bytes: int = Field(32_768, ge=1024, le=1_048_576,
                                       description="Request line plus headers, in bytes; more answers 431")
    http_max_headers: int = Field(100, ge=8, le=10_000, description="Header fields per request; more answers 431")
    http_header_timeout_seconds: float = Field(
        10.0, gt=0, le=600, description="A request's line and headers must arrive within this long of its first "
                                        "byte (or of the connection opening); else 408 and the connection closes")
    # Hostile clients (service/web/body_limits.py, service/web/overload.py, service/logs/fanout.py)
    http_body_timeout_seconds: float = Field(
        10.0, gt=0, le=600, description="A request body must arrive within this long of its head, plus 1 s per "
                                        "TRAINJOBS_HTTP_BODY_MIN_BYTES_PER_SECOND bytes received; else 408. "
                                        "Bodies are read before a request takes a request slot")
    http_body_min_bytes_per_second: float = Field(
        1024.0, gt=0, le=1 << 30, description="The slowest upload rate that earns more time for a body")
    http_body_max_seconds: float = Field(
        60.0, gt=0, le=3600, description="The longest any request body may take to arrive, however fast it "
                                         "comes; then 408")
    http_body_buffer_bytes: int = Field(
        64 << 20, ge=1 << 20, le=1 << 34, description="Bytes of request bodies one process holds at once "
                                                      "(being read or served, counted as bytes arrive); more answers 503 "
                                                      "with Retry-After")
    max_streams_per_caller: int = Field(
        64, ge=1, le=100_000, description="Streams (SSE) one credential (token or UI sign-in) may have open in "
                                          "one process; more answers 429")
    shutdown_grace_seconds: float = Field(
        3.0, ge=0, le=600, description="On SIGINT/SIGTERM, streams end at once (with a `reconnect` event); "
                                       "requests still running get this long before they are cancelled. "
                                       "A second signal exits at once")
    metrics_token: SecretStr | None = Field(
        None, description="Bearer token that /metrics needs for job counts (trainjobs_jobs). Without it /metrics "
                          "shows only process metrics: request counts, latencies, reconciler passes")
    template_cache_size: int = Field(
        256, ge=0, le=100_000, description="Template versions each API process keeps parsed and checked for "
                                           "submits (versions never change; 0: parse on every submit), and "
                                           "as many templates' last read heads, which a repeat submit checks in "
                                           "its one writing statement instead of reading them first")
    compile_cache_bytes: int = Field(
        16 * 1024 * 1024, ge=0, le=1 << 34,
        description="JSON bytes of compiled jobs each API process keeps, so that a submit of the same template "
                    "version with the same parameters and overrides reuses the compile and the price (0: "
                    "compile every submit); one job above a tenth of it is not kept")
    auth_cache_seconds: float = Field(
        60.0, ge=0, le=3600, description="How long each API process remembers a token's team and role for "
                                         "submits (POST /v1/jobs); a revocation is still checked on every "
                                         "submit, in the same round trip as the template (0: no cache)")
    auth_cache_size: int = Field(
        10_000, ge=0, le=1_000_000, description="Tokens each API process remembers (least recently used out)")
    log_format: Literal["auto", "json", "text"] = Field(
        "auto", description="auto: text on a terminal, JSON otherwise; json: one object a line with "
                            "request_id; text: one readable line")
    log_level: str = "INFO"

    # Local backend
    local_work_dir: Path | None = Field(
        None, description="Run folders of local jobs. Default: tied to the database, not the working "
                          "directory: <db file>.runs/ for SQLite, "
                          "$XDG_DATA_HOME/trainjobs/<host>-<port>-<db>/runs for PostgreSQL")
    local_isolate_replicas: bool = Field(
        True, description="When the service runs as root, each local job's replicas run as an unprivileged "
                          "uid of their own (see docs/local.md)")
    local_replica_uid_base: int = Field(200_000, ge=1000, le=2**31 - 2, description="First uid for replicas")
    local_replica_uid_count: int = Field(1000, ge=1, le=100_000,
                                         description="uids for replicas: at most this many local jobs at once")
    local_sandbox: Literal["namespaces", "none"] = Field(
        "namespaces", description="As root: each local job in namespaces of its own (PID, network, mount, IPC, "
                                  "UTS; docs/local.md). none: replicas share the host's network and processes "
                                  "(a single-user host only; logged loudly at start)")
    local_sandbox_shared_dirs: list[Path] = Field(
        default_factory=list, description="Host folders every sandboxed local job sees (read-write, file "
                                          "permissions still apply), e.g. a dataset cache; the rest of the host "
                                          "is read-only and /tmp private")
    local_max_processes_per_job: int = Field(
        4096, ge=0, description="As root: processes (threads included) one local job may have at once, its "
                                "cgroup's pids.max (a fork bomb stops there); 0: no limit")
    local_sandbox_idle_seconds: float = Field(
        60.0, ge=1.0, le=86_400.0,
        description="As root: a job's sandbox (its namespaces' init, which holds its uid and cgroup) ends by "
                    "itself once no process of the job has run in it for this long, or once its run folder is "
                    "gone (checked every second), so a job whose service never comes back does not hold them "
                    "forever")
    local_max_running_jobs: int = Field(2, ge=0, description="Local jobs running at once; the rest wait in "
                                        "QUEUED. 0 holds every local job in QUEUED.")
    local_cancel_grace_seconds: float = 10.0
    local_python: str | None = Field(None, description="Python that runs `python ...` commands; default: this one")
    local_max_replicas_per_job: int = Field(32, ge=1, description="Jobs with more replicas are refused locally")

    def resolved_local_work_dir(self) -> Path:
        return Path(self.local_work_dir) if self.local_work_dir else default_local_work_dir(self.database_url)

    # Logs API
    logs_follow_interval_seconds: float = Field(0.1, gt=0, description="How often a followed log is read")
    logs_follow_max_interval_seconds: float = Field(
        0.5, gt=0, le=60, description="A followed log with nothing new is read less and less often, up to this "
                                      "(or 4 times the backend's own floor: 20 s for Cloud Logging)")
    logs_reader_buffer_lines: int = Field(20_000, ge=100, le=1_000_000,
                                          description="Recent lines a shared log reader keeps for followers who join")
    logs_follower_buffer_lines: int = Field(
        10_000, ge=10, le=1_000_000, description="Unsent lines a follower may lag by before it is cut with a "
                                                 "`resync` event (it resumes with Last-Event-ID)")
    logs_reader_buffer_bytes: int = Field(
        4 << 20, ge=64 << 10, le=1 << 32, description="Bytes of recent events a shared log reader keeps (as sent: "
                                                      "JSON-escaped) for followers who join")
    logs_follower_buffer_bytes: int = Field(
        1 << 20, ge=64 << 10, le=1 << 32, description="Unsent bytes a follower may lag by before it is cut with "
                                                      "a `resync` event (it resumes with Last-Event-ID)")
    logs_buffer_bytes: int = Field(
        64 << 20, ge=1 << 20, le=1 << 36, description="Bytes all log readers and followers of one process hold "
                                                      "together; past it the laggiest followers are cut (resync) "
                                                      "and readers keep fewer recent lines")
    logs_stream_line_max_bytes: int = Field(
        16_384, ge=256, le=1 << 20, description="A streamed log line longer than this (as sent, JSON-escaped) "
                                                "is cut, with a visible marker; the JSON pages keep it whole")
    logs_stream_batch_bytes: int = Field(
        256 << 10, ge=16 << 10, le=64 << 20, description="Events one read of a followed log hands out at once "
                                                         "(bytes as sent); a read that finds more continues at once")
    logs_page_max_bytes: int = Field(
        4 << 20, ge=64 << 10, le=1 << 30, description="Message bytes in one JSON page of logs; a page stops "
                                                      "there (its cursor resumes after its last line)")
    logs_stream_max_seconds: float = Field(
        300.0, gt=0, le=86_400, description="A log stream of the API ends after this long with a `reconnect` "
                                            "event; clients resume with Last-Event-ID (the Python client and "
                                            "`jobs logs -f` do it themselves)")
    gil_switch_interval_ms: float = Field(
        0.5, ge=0.05, le=100, description="How long one thread of a process may hold Python's GIL while "
                                          "another waits for it (sys.setswitchinterval; Python's own is 5 ms), "
                                          "while at least GIL_FAST_SWITCH_STREAMS log streams are open: "
                                          "while the event loop writes a batch of log lines to thousands of "
                                          "followers, a request's thread waits up to this at every database "
                                          "round trip")
    gil_fast_switch_streams: int = Field(
        100, ge=0, le=100_000, description="From this many open log streams on, the GIL's switch interval is "
                                           "GIL_SWITCH_INTERVAL_MS; below, Python's own (a burst of submits "
                                           "costs 13% less CPU with it). 0: always")
    logs_heartbeat_seconds: float = Field(15.0, gt=0, description="SSE comment after this long without an event")
    logs_fanout_loop_share: float = Field(
        0.1, gt=0, le=1, description="The most of the event loop's time a shared log reader spends handing "
                                      "lines to its followers: with many followers it reads less often (bigger "
                                      "batches, the same lines) so requests are still answered at once")

    # Epoch history (GET /v1/jobs/{id}/epochs, the UI's charts). Replica output is untrusted.
    job_epochs_max_per_job: int = Field(1000, ge=1, le=1_000_000, description="Epochs kept per job: the "
                                        "latest this many; older rows are dropped as new ones arrive")
    job_epochs_max_metrics: int = Field(64, ge=1, le=1000, description="Metrics kept per epoch (by name); "
                                        "the rest of a larger dict is dropped")

    # Retries (a template's `retry` policy; docs/retries.md)
    retry_max_attempts: int = Field(10, ge=1, le=1000, description="The most attempts a retry policy may ask "
                                    "for (max_attempts above it is a 422 at submit)")
    retry_max_backoff_seconds: float = Field(
        86_400.0, ge=0, le=30 * 86_400, description="The longest backoff a retry policy may ask for "
                                                     "(backoff.initial_seconds or max_seconds above it is a 422)")

    # Web UI (/ui)
    ui_session_secret: SecretStr | None = Field(
        None, description="Key that signs the UI's session cookies (32+ characters). Default: one "
                          "generated on first use and kept in the database, shared by every worker")
    ui_session_max_age_seconds: int = Field(43200, ge=60, le=30 * 86400,
                                            description="A UI sign-in lasts this long")
    ui_secure_cookies: bool | None = Field(None, description="Mark UI cookies Secure. Default: when the "
                                           "request came over https")
    ui_stream_interval_seconds: float = Field(1.0, gt=0, le=60, description="How often the UI's live feed "
                                              "reads the jobs changed since its last read (one query for "
                                              "every open page of this process)")
    ui_stream_max_seconds: float = Field(30.0, gt=0, le=3600, description="A UI event stream ends after "
                                         "this long and the browser reconnects where it left off (so open "
                                         "tabs never hold a stopping server, nor a page the browser failed "
                                         "to close, one of its six connections to the host for longer)")
    ui_page_size: int = Field(50, ge=1, le=200, description="Jobs per page of the UI's list")
    ui_diff_max_lines: int = Field(5000, ge=10, le=100_000, description="Template versions longer than this "
                                   "(as indented JSON) are not diffed on a page (the diff's cost grows faster "
                                   "than the length)")
    ui_log_tail_lines: int = Field(200, ge=1, le=5000, description="Log lines a job page shows before "
                                   "JavaScript follows the rest")

    # Webhooks (/v1/webhooks): deliveries are sent by the controller, from an outbox written with
    # each job change. Receivers are untrusted, and so is where their names point.
    public_url: str | None = Field(None, description="This service's address as its users reach it (e.g. "
                                   "https://trainjobs.example.com); webhooks link jobs with it. Default: no "
                                   "absolute links (Slack messages then name the job without a link)")
    webhook_max_per_team: int = Field(20, ge=1, le=1000, description="Webhook subscriptions one team may have")
    webhook_allowed_networks: list[str] = Field(
        default_factory=list, description='Non-public networks webhooks may still be sent to, as CIDRs, e.g. '
        '["10.20.0.0/16"]. Addresses that are private, loopback, link-local, multicast or otherwise not '
        'public are refused at creation and at every delivery, unless listed here')
    webhook_max_payload_bytes: int = Field(65_536, ge=2048, le=1_048_576,
                                           description="A delivery's body is cut to fit this")
    webhook_request_timeout_seconds: float = Field(
        10.0, gt=0, le=120, description="The whole of one delivery attempt (name lookup, connect, send, the "
                                        "receiver's answer); longer is a failed attempt")
    webhook_max_attempts: int = Field(30, ge=1, le=100, description="Attempts per delivery, the first included")
    webhook_resolve_timeout_seconds: float = Field(
        2.0, gt=0, le=30, description="How long creating a webhook waits for its receiver's name to resolve "
                                      "(the check of its addresses); a name not resolved by then is accepted and "
                                      "checked at every delivery, as a name that does not resolve yet. A slow name "
                                      "server holds a request no longer than this")
    webhook_retry_window_seconds: float = Field(86_400.0, ge=0, le=7 * 86_400,
                                                description="A delivery is retried for this long after its event, "
                                                            "then marked failed")
    webhook_retry_initial_seconds: float = Field(10.0, gt=0, le=3600,
                                                 description="Wait before the second attempt; doubles each time")
    webhook_retry_max_interval_seconds: float = Field(7200.0, gt=0, le=86_400,
                                                      description="The longest wait between two attempts")
    webhook_retry_jitter: float = Field(0.1, ge=0, le=1, description="Each wait varies by up to this fraction, "
                                        "so a receiver back from an outage is not hit by every retry at once")
    webhook_delivery_batch_size: int = Field(100, ge=1, le=10_000, description="Deliveries read per pass")
    webhook_delivery_concurrency: int = Field(10, ge=1, le=200, description="Deliveries in flight at once, and the "
                                              "threads that look up their receivers' names (one lookup per name)")
    webhook_dispatch_interval_seconds: float = Field(
        1.0, gt=0, le=60, description="How often the controller looks for due deliveries (on PostgreSQL a "
                                      "new event also wakes it at once)")
    webhook_response_log_bytes: int = Field(1024, ge=0, le=65_536,
                                            description="Bytes of a receiver's answer kept in the delivery log")
    webhook_log_retention_days: float = Field(30.0, gt=0, le=3650, description="Finished deliveries (and their "
                                              "attempts) older than this are deleted")

    # Cost estimates and team budgets (docs/cost.md)
    price_file: Path | None = Field(
        None, description="JSON price table (docs/cost.md) that replaces the shipped one "
                          "(service/cost/prices-2026-11.json); checked at startup, which fails on a bad file")
    cost_region: str | None = Field(None, max_length=64, description="Region jobs are priced in (local jobs "
                                    "too: what they would cost on Vertex AI). Default: TRAINJOBS_VERTEX_LOCATION")
    team_limits_max_accelerator_types: int = Field(
        32, ge=1, le=1000, description="Accelerator types one team's limits may name")

    def resolved_cost_region(self) -> str:
        return self.cost_region or self.vertex_location
    # Shared capacity (service/capacity, service/scheduling, docs/queue.md)
    capacity: dict[str, dict[str, int]] = Field(
        default_factory=dict, description='What each backend may run at once, per resource, where an operator '
        'set nothing through the API (PUT /v1/capacity/{backend}), e.g. {"local": {"core": 8}, "vertex": '
        '{"gpu:NVIDIA_TESLA_A100": 16, "vcpu": 512}}; a resource no capacity names is not arbitrated')
    scheduler_starve_after_seconds: float = Field(
        1800.0, ge=0, le=30 * 86_400, description="A job waiting this long has capacity kept for it as it "
        "frees, so a large job is never starved by a stream of small ones")
    scheduler_max_preemptions_per_pass: int = Field(
        16, ge=0, le=10_000, description="Jobs one admission pass may preempt (0: no preemption)")
    scheduler_max_waiting: int = Field(
        20_000, ge=1, le=1_000_000, description="Waiting jobs of one team on one backend an admission pass "
        "looks at (each team's oldest, so one team's backlog never hides another's); the rest wait for a later pass")
    preemption_grace_seconds: float = Field(
        30.0, ge=0, le=3600, description="A preempted local or Slurm job's replicas get SIGTERM, then SIGKILL "
        "after this long (the trainer saves a checkpoint in between)")
    max_preemptions_per_job: int = Field(
        3, ge=0, le=1000, description="Times one job (all its attempts) may be preempted for priority; after "
        "that no class preempts it (a borrowed job stays reclaimable by a team inside its nominal quota)")
    queue_forecast_seconds: float = Field(
        0.3, ge=0, le=10, description="CPU seconds one queue computation may spend playing the plan forward "
        "(the predicted start order and likely starts); the jobs it does not reach keep the current pass's order")
    queue_forecast_passes: int = Field(
        200, ge=0, le=100_000, description="Scheduler passes one queue computation's forecast plays at most")
    queue_cache_seconds: float = Field(
        2.0, ge=0, le=60, description="GET /v1/queue and a waiting job's view reuse one computed queue per "
        "backend and process for this long")
    max_priority_classes: int = Field(100, ge=1, le=10_000, description="Priority classes the service may have")
    capacity_max_resources: int = Field(
        64, ge=1, le=10_000, description="Resources one backend's capacity (or one team's share) may name")

    # Sweeps (/v1/sweeps): the controller launches each sweep's trials as jobs, as room frees.
    sweep_max_trials: int = Field(200, ge=1, le=10_000, description="Trials one sweep may have: a grid's "
                                  "combinations, or a random search's trial_count")
    sweep_max_parallel: int = Field(20, ge=1, le=1000, description="The highest max_parallel a sweep may ask for "
                                    "(unfinished trials at once)")
    sweep_max_active_per_team: int = Field(20, ge=1, le=1000, description="Unfinished sweeps one team may have")
    sweep_interval_seconds: float = Field(2.0, gt=0, le=300, description="How often the controller looks at "
                                          "unfinished sweeps (a new sweep or a cancel also wakes it at once)")
    sweep_batch_size: int = Field(50, ge=1, le=10_000, description="Sweeps the controller looks at per pass "
                                  "(the least recently looked at first)")
    # Importing AI Platform configs and gcloud flags (POST /v1/templates:import). The source is untrusted text.
    import_max_bytes: int = Field(65_536, ge=1024, le=1_048_576, description="The largest config.yaml or gcloud "
                                  "command text an import takes (bytes, UTF-8)")
    import_max_yaml_aliases: int = Field(50, ge=0, le=10_000, description="YAML aliases (*name) an imported "
                                         "config may use; more is refused (alias bombs)")
    import_max_yaml_nodes: int = Field(5000, ge=100, le=1_000_000, description="Values in an imported config "
                                       "once its aliases are expanded; more is refused")
    import_max_yaml_depth: int = Field(32, ge=4, le=1000, description="Nesting depth of an imported config")
    import_max_yaml_expanded_bytes: int = Field(
        262_144, ge=1024, le=16_777_216, description="Bytes of text (keys and values) in an imported config once "
                                                     "its aliases and merge keys are expanded; more is refused")
    # The import's text is parsed in worker processes (service/interop/import_workers.py): pure-Python
    # parsing in the API process held the GIL, and every other request waited for it.
    import_workers: int = Field(2, ge=1, le=64, description="Worker processes that parse imports: imports "
                                "parsed at once")
    import_queue: int = Field(8, ge=0, le=1000, description="Imports that may wait for a busy worker; more "
                              "are answered 503 with Retry-After")
    import_parse_timeout_seconds: float = Field(1.5, gt=0, le=60, description="Wall time an import may spend "
                                                "in a worker (all its parses); past it the worker is killed and "
                                                "replaced, the import answered 422")
    import_worker_memory_mb: int = Field(256, ge=64, le=16_384, description="Address space of an import worker "
                                         "(RLIMIT_AS); an import that needs more is answered 422")
    import_worker_start_seconds: float = Field(10.0, gt=0, le=120, description="How long a new import worker "
                                               "may take to start; past it the import is answered 503")

    # Vertex backend
    vertex_project: str | None = None
    vertex_location: str = "us-central1"
    vertex_api_endpoint: str | None = Field(None, description="Default: {location}-aiplatform.googleapis.com")
    logging_api_endpoint: str | None = Field(None, description="Default: logging.googleapis.com")
    vertex_base_output_directory: str | None = Field(
        None, description="gs:// prefix for jobs whose template sets none; each job writes under <it>/<job id>")
    vertex_service_account: str | None = Field(None, description="Service account for jobs whose template sets none")
    trainer_image: str = Field(
        "trainjobs-trainer:latest", min_length=1, max_length=1024,
        description="Image of the packaged trainer (Dockerfile.trainer) that the mwms-demo template runs, "
                    "e.g. us-central1-docker.pkg.dev/PROJECT/REPO/trainer:1; Vertex AI needs it in a registry")
    vertex_request_timeout_seconds: float = Field(
        5.0, gt=0, description="One HTTP call to Vertex AI (get, list, cancel) or Cloud Logging")
    vertex_create_timeout_seconds: float = Field(
        60.0, gt=0, le=600, description="One customJobs.create call: generous, since a create can take "
                                        "several seconds and one the client gives up on may still land. "
                                        "Also sent to Google as X-Server-Timeout")
    vertex_retry_deadline_seconds: float = Field(
        10.0, gt=0, description="All retries of one log page after 5xx or timeouts, together (the controller "
                                "never retries inside a pass; a 429 pauses the budget instead)")
    vertex_retry_initial_seconds: float = Field(0.25, gt=0, description="First backoff; doubles up to 4 s")
    vertex_submit_grace_seconds: float = Field(
        180.0, ge=0, description="After a create attempt whose outcome is unknown (timeout, crash, a "
                                 "controller that lost its lock), no controller creates that job again for "
                                 "this long; it only looks it up by label (adopting a create that landed late). "
                                 "Must exceed a lookup plus a create (request + create timeout) with margin")
    vertex_max_running_jobs: int | None = Field(
        None, ge=0, description="Vertex jobs launched at once by this service; the rest wait in QUEUED, "
                                "oldest first. Default: no cap of ours (Vertex quotas still apply)")
    vertex_list_page_size: int = Field(1000, ge=1, le=1000, description="pageSize of customJobs.list (each page "
                                                                         "is one call of the Vertex budget)")
    vertex_poll_interval_seconds: float = Field(
        10.0, ge=0, le=600, description="How often the controller lists Vertex jobs to follow their states "
                                        "(its loop runs more often; cancels and creates do not wait for this)")
    vertex_progress_interval_seconds: float = Field(
        60.0, ge=0, le=3600, description="How often the progress lines of all running Vertex jobs are read "
                                         "from Cloud Logging (one query for all of them)")

    # Google-call budget (service/backends/vertex/budget.py): token buckets per process,
    # under Google's per-project quotas, leaving the rest for people and other tools.
    vertex_create_per_minute: float = Field(
        30.0, gt=0, le=6000, description="customJobs.create calls per minute, within the calls of "
                                         "TRAINJOBS_VERTEX_CALLS_PER_MINUTE (Vertex allows about 60 creates per "
                                         "region, shared by the project)")
    vertex_create_burst: int = Field(5, ge=1, le=1000, description="creates that may go out back to back")
    vertex_calls_per_minute: float = Field(
        120.0, gt=0, le=60000, description="Every Vertex AI call this service makes in its region, per minute: "
                                           "customJobs create, get, list and cancel, model uploads (Vertex allows "
                                           "about 600 get/list/cancel per region, shared by the whole project). "
                                           "Creates and cancels go first; following jobs slows down to fit")
    vertex_calls_burst: int = Field(10, ge=1, le=10000, description="Vertex AI calls that may go out back to back; "
                                                                    "following jobs leaves half of them for creates "
                                                                    "and cancels")
    vertex_model_upload_max_attempts: int = Field(
        5, ge=1, le=100, description="Uploads of one job's model tried (each after a lookup by its job-id label) "
                                     "before the upload is recorded as failed; the job stays SUCCEEDED")
    vertex_model_uploads_per_pass: int = Field(
        5, ge=1, le=1000, description="Model uploads (or their lookups) the controller makes in one pass; "
                                      "the rest wait for the next")
    vertex_model_upload_retry_seconds: float = Field(
        60.0, ge=0, le=86400, description="After a model upload's answer was lost or refused for now "
                                          "(429, 5xx, a timeout), the next try waits this long")
    logging_reads_per_minute: float = Field(
        30.0, gt=0, le=6000, description="Cloud Logging entries.list calls per minute by this host's API "
                                         "processes together (Google allows 60 per project, shared with "
                                         "everyone using Logs Explorer there); divided among --workers")
    logging_reads_burst: int = Field(5, ge=1, le=1000, description="entries.list calls back to back")
    google_backoff_max_seconds: float = Field(
        60.0, gt=0, le=3600, description="Longest pause of one kind of call after Google answered 429 "
                                         "(the pause doubles from 2 s with each 429 in a row)")
    logs_budget_wait_seconds: float = Field(
        2.0, ge=0, le=30, description="A GET /logs page waits this long for the Cloud Logging budget before "
                                      "answering 503 with Retry-After")
    logs_follow_min_seconds: float = Field(
        5.0, gt=0, le=600, description="Vertex log followers read Cloud Logging at most this often per job")
    logs_follow_max_seconds: float = Field(
        30.0, gt=0, le=3600, description="...and at least this often while the job is quiet")
    logs_follow_share: float = Field(
        0.5, gt=0, le=1, description="Part of the Cloud Logging budget that followed jobs may use together; "
                                     "the rest stays for pages and progress")


    # Slurm backend (docs/slurm.md): the service drives a team's own cluster with sbatch, squeue
    # and scancel; the run folders are on storage the service host and every node share.
    slurm_conf: Path | None = Field(None, description="The cluster's slurm.conf (SLURM_CONF for sbatch, squeue "
                                    "and scancel). Default: the clients' own default (/etc/slurm/slurm.conf)")
    slurm_bin_dir: Path | None = Field(None, description="Folder holding sbatch, squeue and scancel. Default: "
                                       "/usr/local/bin, /usr/bin, /bin")
    slurm_work_dir: Path | None = Field(None, description="Run folders of Slurm jobs (logs, outputs): a folder the "
                                        "service host and every node see at the same path (NFS, Lustre...). "
                                        "Required when the slurm backend is enabled")
    slurm_python: str = Field("python3", min_length=1, max_length=1024,
                              description="Python on the nodes that runs the launcher and `python ...` commands")
    slurm_job_user: str | None = Field(None, max_length=64, description="The user (name or uid) jobs run as when "
                                       "the service is root; never root. Without root: the service's own user")
    slurm_team_users: dict[str, str] = Field(
        default_factory=dict, max_length=1000,
        description="Team name -> the Slurm user (name or uid) that team's jobs run as when the service is root, "
                    "each with a primary group of its own: one team's tasks then cannot enter, write or read "
                    "another's run folders. A team not named runs as slurm_job_user (shared by every such team)")
    slurm_partition: str | None = Field(None, max_length=64, description="Default partition (a template may name "
                                        "one with the label slurm-partition)")
    slurm_account: str | None = Field(None, max_length=64, description="Default account (label slurm-account)")
    slurm_qos: str | None = Field(None, max_length=64, description="Default QoS (label slurm-qos)")
    slurm_allowed_partitions: list[str] = Field(default_factory=list, description="Partitions a job's labels may "
                                                "name; empty: any (Slurm's own limits still apply)")
    slurm_allowed_accounts: list[str] = Field(default_factory=list, description="Accounts a job's labels may name; "
                                              "empty: any the job user may use")
    slurm_allowed_qos: list[str] = Field(default_factory=list, description="QoS a job's labels may name; empty: any")
    slurm_team_accounts: dict[str, str] = Field(
        default_factory=dict, max_length=1000,
        description="Team name -> the Slurm account its jobs are charged to (sbatch --account), so Slurm's fair "
                    "share arbitrates the cluster between teams. A team not named: the label slurm-account, "
                    "else slurm_account, else the user's DefaultAccount. Checked at start (Slurm names)")
    slurm_priority_qos: dict[str, str] = Field(
        default_factory=dict, max_length=1000,
        description="Priority class name -> the Slurm QoS its jobs get (sbatch --qos), so Slurm's QoS priority "
                    "and preemption decide on the cluster. A class not named: the label slurm-qos, else "
                    "slurm_qos. Checked at start (Slurm names)")
    slurm_requeue: bool = Field(False, description="Submit jobs requeueable (sbatch --requeue): a job Slurm preempts "
                                "with PreemptMode=REQUEUE (or a node failure) goes back to PENDING under the same "
                                "job id and restarts from its checkpoints, followed by trainjobs. Off: --no-requeue "
                                "(Slurm ends such a job PREEMPTED or NODE_FAIL; trainjobs starts a new attempt)")
    slurm_cpus_per_task: int | None = Field(None, ge=1, le=1024, description="CPUs for every task. Default: the "
                                            "vCPUs of the role's machine_type (n1-standard-4: 4)")
    slurm_mem_per_cpu_mb: int | None = Field(None, ge=1, le=10_000_000,
                                             description="--mem-per-cpu for every task; default: the cluster's")
    slurm_max_running_jobs: int | None = Field(None, ge=0, description="Slurm jobs launched at once by this "
                                               "service; the rest wait in QUEUED. Default: no cap of ours")
    slurm_command_timeout_seconds: float = Field(30.0, gt=0, le=600, description="One sbatch, squeue or scancel "
                                                 "call; longer is a transient failure (the next pass tries again)")
    slurm_poll_interval_seconds: float = Field(2.0, ge=0, le=600, description="How often the controller lists the "
                                               "cluster's jobs (one squeue call for all of them)")
    slurm_rendezvous_timeout_seconds: float = Field(
        300.0, gt=0, le=86_400, description="How long a task waits on its node for every other task of its job "
                                            "to publish its address before it gives up (exit 3)")

    # Simulated backend (docs/sim.md): a job is a timer, no process starts; for benchmarks and replays.
    sim_speed: float = Field(1.0, gt=0, le=1_000_000, description="Time scale: a job of 10 s runs 10/speed s")
    sim_default_duration_seconds: int = Field(60, ge=0, description="A job without the label sim-duration-seconds")
    sim_max_duration_seconds: int = Field(30 * 86_400, ge=1, le=10 * 365 * 86_400,
                                          description="Longest sim-duration-seconds a job may name (422 past it)")
    sim_capacity: dict[str, int] = Field(default_factory=dict, description='What the sim offers (GET /v1/capacity), '
                                         'e.g. {"core": 512}; applied only as TRAINJOBS_CAPACITY or the API sets it')
    sim_max_running_jobs: int | None = Field(None, ge=0, description="Sim jobs running at once; the rest wait in "
                                             "QUEUED. Default: no cap of ours")

def default_local_work_dir(database_url: str) -> Path:
    """The local backend's run folders, tied to the database (every process of one service finds
    the same). Named by a digest of the database's identity, not its name: a job sees its own
    run folder's host path (its HOME, /proc/self/mountinfo), and the database's file name, host
    or name is nothing it needs (issue 48.4). A folder of the earlier naming (`<db file>.runs`,
    `<host>-<port>-<db>/runs`) that exists is still used: an upgrade moves nothing."""
    from sqlalchemy.engine import make_url

    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        db = url.database
        if db and db != ":memory:":
            path = Path(db).expanduser().resolve()
            earlier = path.with_name(path.name + ".runs")
            return earlier if earlier.is_dir() else path.with_name(f"runs-{_digest(str(path))}")
        return Path(os.environ.get("TMPDIR", "/tmp")) / f"trainjobs-memory-{os.getpid()}" / "runs"
    # root's home is closed to the unprivileged uids replicas run as (docs/local.md).
    data = Path("/var/lib") if os.geteuid() == 0 else \
        Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    ident = f"{url.host or 'localhost'}-{url.port or 5432}-{url.database or ''}"
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in ident)[:100]
    if safe != ident:
        safe += "-" + hashlib.sha256(ident.encode()).hexdigest()[:8]
    earlier = data / "trainjobs" / safe / "runs"
    return earlier if earlier.is_dir() else data / "trainjobs" / _digest(ident) / "runs"


def _digest(ident: str) -> str:
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


@lru_cache
def get_settings() -> Settings:
    return Settings()
