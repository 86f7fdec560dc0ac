"""Parley settings: everything comes from the environment, with safe defaults.

Embedded mode (no ``DATABASE_URL`` / ``REDIS_URL``): the launcher starts PostgreSQL and Redis
under ``var/``; later processes find them in ``var/run/infra.json``. docs/configuration.md.
"""

from __future__ import annotations

from pathlib import Path

from trainer import refusals  # pure: the defaults the offline replay shares
from trainer.claim import ClaimRules  # pure: the claim rules' defaults, shared with the replay
from trainer.config import UpdateConfig  # pure: the trainer's own defaults
from trainer.gate import GateThresholds  # pure: the gate's defaults, shared with the replay
from trainer.judge import JUDGE_KINDS  # pure: the judges there are
from webapp.config import (
    ConfigError,
    EmbeddedInfraMissing,
    context_window,
    database_from_url,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_networks,
    env_str,
    gpu_host,
    infra_urls,
    judge_api_key,
    secret_key,
    vllm_api_key,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("PARLEY_VAR_DIR", str(BASE_DIR / "var"))).resolve()
MODELS_DIR = Path(env_str("PARLEY_MODELS_DIR", str(VAR_DIR / "models"))).resolve()
# The base model's GGUF and its wheel, beside the models (the tests share both).
MODEL_CACHE_DIR = Path(env_str("PARLEY_MODEL_CACHE_DIR", str(MODELS_DIR.parent / "cache")))

DEBUG = env_bool("DJANGO_DEBUG", False)
# The launcher sets PARLEY_EMBEDDED=1 for its children when it started PostgreSQL or Redis itself.
EMBEDDED = env_bool(
    "PARLEY_EMBEDDED", not env_str("DATABASE_URL", "") or not env_str("REDIS_URL", "")
)
SECRET_KEY = secret_key(debug=DEBUG, embedded=EMBEDDED, var_dir=VAR_DIR)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])
# The reverse proxies whose X-Forwarded-For is believed (webapp.core.net): none by default, so
# a client cannot choose the address the log-in throttle counts.
TRUSTED_PROXIES = env_networks("PARLEY_TRUSTED_PROXIES")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "webapp.core",
    "webapp.chat",
    "webapp.api",
    "webapp.learning",
    "webapp.dashboard",
    "webapp.privacy",
    "webapp.memory",
    "webapp.account",
    "webapp.sharing",
    "webapp.frontdoor",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "webapp.core.middleware.ContentSecurityPolicyMiddleware",
    "webapp.core.middleware.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "webapp.urls"
ASGI_APPLICATION = "webapp.asgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Infrastructure -------------------------------------------------------------------------
try:
    DATABASE_URL, REDIS_URL = infra_urls(var_dir=VAR_DIR)
except EmbeddedInfraMissing:
    # Commands that need no database (prepare_model, check) still work before the launcher
    # has started anything; the first query then fails with a clear connection error.
    DATABASE_URL, REDIS_URL = "postgres://parley@127.0.0.1:1/parley-not-started", ""

DATABASES = {"default": database_from_url(DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CHANNEL_LAYERS = (
    {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # redis-py 8 reads with a 5 s socket timeout by default, exactly channels-redis's
            # 5 s blocking receive: on a busy host the reply came late and the open chat
            # socket died (1011). Reads wait longer than the receive; connects stay quick.
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 30}]},
        }
    }
    if REDIS_URL
    else {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
)

# The cache holds only short-lived counters (the log-in throttle); Redis makes them shared by
# every web replica. Without Redis each process counts for itself.
CACHES = {
    "default": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "parley",
            "OPTIONS": {"socket_timeout": 1, "socket_connect_timeout": 1},
        }
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

# --- Celery ---------------------------------------------------------------------------------
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "") or (
    REDIS_URL.replace("unix://", "redis+socket://", 1) if REDIS_URL else ""
)
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", "") or CELERY_BROKER_URL

# --- Serving and model ----------------------------------------------------------------------
PARLEY_HOST = env_str("PARLEY_HOST", "127.0.0.1")
PARLEY_PORT = env_int("PARLEY_PORT", 8000)
PARLEY_BASE_MODEL = env_str("PARLEY_BASE_MODEL", "")
BASE_MODEL_DIR = (
    Path(PARLEY_BASE_MODEL).expanduser().resolve()
    if PARLEY_BASE_MODEL
    else MODELS_DIR / "SmolLM2-135M-Instruct"
)
PARLEY_MODEL_ID = env_str("PARLEY_MODEL_ID", "parley")
# Sampling defaults for the web chat (API clients send their own).
CHAT_MAX_TOKENS = env_int("PARLEY_CHAT_MAX_TOKENS", 512)
CHAT_TEMPERATURE = env_float("PARLEY_CHAT_TEMPERATURE", 0.7)
# Open sign-up: on in embedded mode (one person, one machine), off in production (invites).
SIGNUP_OPEN = env_bool("PARLEY_SIGNUP_OPEN", EMBEDDED)
# /v1 API limits.
API_RATE_LIMIT_PER_MINUTE = env_int("PARLEY_API_RATE_LIMIT_PER_MINUTE", 600)
API_MAX_BODY_BYTES = env_int("PARLEY_API_MAX_BODY_BYTES", 4 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = API_MAX_BODY_BYTES
API_SERVE_RETRY_AFTER_S = env_int("PARLEY_API_RETRY_AFTER_S", 10)
# One request's size: above these a /v1 request is a 400 naming the field, as OpenAI answers.
API_MAX_TOKENS = env_int("PARLEY_API_MAX_TOKENS", 2048)
API_MAX_N = env_int("PARLEY_API_MAX_N", 4)
# Per-user limits (over all of a user's keys and browser tabs together).
USER_MAX_API_KEYS = env_int("PARLEY_USER_MAX_API_KEYS", 10)
# Two answers at once per user: more push back others' first tokens (bench.load --flood).
USER_MAX_STREAMS = env_int("PARLEY_USER_MAX_STREAMS", 2)
# Memory (docs/learning.md): the served form, limits, whether learnt ones are still served.
MEMORY_FORM = env_choice("PARLEY_MEMORY_FORM", "appended", ("appended", "system", "both"))
MEMORY_MAX_KEPT = env_int("PARLEY_MEMORY_MAX_KEPT", 50)
MEMORY_MAX_CHARS = env_int("PARLEY_MEMORY_MAX_CHARS", 300)
MEMORY_SERVED_TOKENS = env_int("PARLEY_MEMORY_SERVED_TOKENS", 256)
MEMORY_SERVE_LEARNT = env_bool("PARLEY_MEMORY_SERVE_LEARNT", True)
USER_RATE_LIMIT_PER_MINUTE = env_int("PARLEY_USER_RATE_LIMIT_PER_MINUTE", 600)
# A stream's slot is freed when it ends; one a crashed process held expires after this.
STREAM_SLOT_TTL_S = env_int("PARLEY_STREAM_SLOT_TTL_S", 900)
# A user's second and later answers at once wait (at most this long) while other users are
# being answered: beyond one answer each, parallel requests use only idle capacity.
USER_EXTRA_STREAM_WAIT_S = env_float("PARLEY_USER_EXTRA_STREAM_WAIT_S", 30.0)
# Earlier states kept per feedback (the newest ones).
FEEDBACK_HISTORY_MAX = env_int("PARLEY_FEEDBACK_HISTORY_MAX", 50)
# Sessions without X-Session-Done close after this much idle time (their last turn is judged).
SESSION_IDLE_MINUTES = env_int("PARLEY_SESSION_IDLE_MINUTES", 30)
# The model titles a conversation after its first answer (queue "judge"); off: its first words.
MODEL_TITLES = env_bool("PARLEY_MODEL_TITLES", True)
FEEDBACK_TAGS_DOWN = env_list(
    "PARLEY_FEEDBACK_TAGS_DOWN",
    [
        "not correct",
        "didn't follow my instructions",
        "too long",
        "too short",
        "wrong style",
        "refused for no reason",
    ],
)
FEEDBACK_TAGS_UP = env_list(
    "PARLEY_FEEDBACK_TAGS_UP", ["accurate", "followed instructions", "well written"]
)
# `serve`'s engine: vllm, llamacpp (webapp.infra.llamacpp_server, on PARLEY_GGUF or the GGUF
# the default model ships as) or auto: vLLM on a GPU, llama.cpp on a CPU where it is installed.
SERVING_ENGINE = env_choice("PARLEY_ENGINE", "auto", ("auto", "vllm", "llamacpp"))
SERVING_GGUF = env_str("PARLEY_GGUF", "")
SERVE_THREADS = env_int("PARLEY_SERVE_THREADS", 0)  # llama.cpp's threads; 0: half the cores
VLLM_HOST = env_str("VLLM_HOST", "127.0.0.1")
VLLM_PORT = env_int("VLLM_PORT", 8001)
VLLM_BASE_URLS = env_list("VLLM_BASE_URLS", [f"http://{VLLM_HOST}:{VLLM_PORT}/v1"])
# vLLM refuses /v1 calls (chat, adapter loading) without this key; every Parley client sends it.
# Embedded: generated once into var/vllm_api_key (the launcher starts vLLM with it); docker: the
# env file's VLLM_API_KEY, given to vLLM and the app containers alike.
VLLM_API_KEY = env_str("VLLM_API_KEY", "") or (
    vllm_api_key(var_dir=VAR_DIR) if EMBEDDED or DEBUG else ""
)
# "auto": bfloat16 on a GPU, float32 on the CPU, the same rule as the trainer's base weights.
VLLM_DTYPE = env_str("VLLM_DTYPE", "auto")
# The window served (prompt + answer), capped at the model's (8192); OpenClaw needs 4000+.
VLLM_MAX_MODEL_LEN = context_window(BASE_MODEL_DIR, env_int("VLLM_MAX_MODEL_LEN", 8192))
VLLM_MAX_LORA_RANK = env_int("VLLM_MAX_LORA_RANK", 16)
# Adapters vLLM runs in one batch (GPU slots, --max-loras) and keeps in CPU memory
# (--max-cpu-loras); past those it evicts the least recently used and reloads on demand.
MAX_LORAS = env_int("PARLEY_MAX_LORAS", 4)
MAX_CPU_LORAS = env_int("PARLEY_MAX_CPU_LORAS", 32)
if MAX_LORAS < 1 or MAX_CPU_LORAS < MAX_LORAS:
    raise ConfigError(
        f"PARLEY_MAX_LORAS={MAX_LORAS} / PARLEY_MAX_CPU_LORAS={MAX_CPU_LORAS}: need at least "
        "1 adapter slot, and at least as many in CPU memory as in a batch"
    )
# A retired version leaves the replicas this long after, once no answer it writes is unfinished.
ADAPTER_UNLOAD_GRACE_S = max(0, env_int("PARLEY_ADAPTER_UNLOAD_GRACE_S", 900))
VLLM_CPU_KVCACHE_SPACE = env_int("VLLM_CPU_KVCACHE_SPACE", 2)
VLLM_GPU_MEMORY_UTILIZATION = env_float("VLLM_GPU_MEMORY_UTILIZATION", 0.85)
VLLM_EXTRA_ARGS = env_str("VLLM_EXTRA_ARGS", "")
VLLM_TOOL_CALL_PARSER = env_str("VLLM_TOOL_CALL_PARSER", "hermes")
ADAPTERS_DIR = Path(env_str("PARLEY_ADAPTERS_DIR", str(VAR_DIR / "adapters"))).resolve()
# The PRM judge of next states: "cues" (the default: reads the user's next message and tool
# results for corrections, complaints, thanks and errors; no model), "hindsight" (scores as
# "cues" and takes the user's follow-up itself as the teacher's hint: trainer.hindsight) or
# "llm" (m votes of the model at JUDGE_BASE_URL, by default the frozen base model on the same
# server; constrained to the three boxes unless PARLEY_JUDGE_CONSTRAINED=0).
JUDGE_KIND = env_choice("PARLEY_JUDGE", "cues", tuple(JUDGE_KINDS))
JUDGE_CONSTRAINED = env_bool("PARLEY_JUDGE_CONSTRAINED", True)
JUDGE_BASE_URL = env_str("JUDGE_BASE_URL", "") or VLLM_BASE_URLS[0]
# vLLM request priority of judge generations (lower = earlier; chat asks with 0). On Parley's
# own vLLM (started with --scheduling-policy priority) the judge waits behind chat; a separate
# judge server without that policy refuses any value but 0, hence 0 when JUDGE_BASE_URL is set.
JUDGE_PRIORITY = env_int("PARLEY_JUDGE_PRIORITY", 0 if env_str("JUDGE_BASE_URL", "") else 10)
JUDGE_MODEL = env_str("JUDGE_MODEL", "base")
JUDGE_API_KEY = judge_api_key(
    judge_base_url=env_str("JUDGE_BASE_URL", ""),
    judge_key=env_str("JUDGE_API_KEY", ""),
    vllm_key=VLLM_API_KEY,
)
JUDGE_VOTES = env_int("PARLEY_JUDGE_VOTES", 3)
# One user's LLM-judge work: in flight at once, and started a minute (the excess is retried
# later by the worker, then by the periodic sweep); a crashed worker's slot expires after
# JUDGE_SLOT_TTL_S. The cue judge is not limited.
USER_MAX_JUDGING = env_int("PARLEY_USER_MAX_JUDGING", 1)
USER_JUDGING_PER_MINUTE = env_int("PARLEY_USER_JUDGING_PER_MINUTE", 20)
JUDGE_SLOT_TTL_S = env_int("PARLEY_JUDGE_SLOT_TTL_S", 600)
# Before its LLM-judge work starts, a user's judge task waits (at most this many seconds) while
# other users' answers are being written, so one user's feedback flood does not slow everyone
# else's answers on the shared vLLM. 0 when the judge has its own server (JUDGE_BASE_URL).
JUDGE_YIELD_S = env_float("PARLEY_JUDGE_YIELD_S", 0.0 if env_str("JUDGE_BASE_URL", "") else 10.0)
# An answer that ended less than this long ago still counts as being written for the wait
# above: users asking again at once leave gaps of a few milliseconds, not a pause.
JUDGE_YIELD_GRACE_S = env_float("PARLEY_JUDGE_YIELD_GRACE_S", 2.0)
JUDGE_MAX_TOKENS = env_int("PARLEY_JUDGE_MAX_TOKENS", 256)
JUDGE_TEMPERATURE = env_float("PARLEY_JUDGE_TEMPERATURE", 0.7)
# Whose feedback trains which adapter: "user" (the default) gives every user their own policy
# lineage, trained only on their feedback and served only to them; "shared" trains one lineage
# on everyone's feedback and serves it to all (one team, one model).
LEARNING_SCOPE = env_choice("PARLEY_LEARNING_SCOPE", "user", ("user", "shared"))
# Turns served by a version more than this many versions behind the live one are not trained on.
SAMPLE_MAX_VERSION_LAG = env_int("PARLEY_SAMPLE_MAX_VERSION_LAG", 4)
# A bare 👎: this many hidden answers are sampled beside it (learning/alternatives.py); 0: none.
DISLIKE_ALTERNATIVES = env_int("PARLEY_DISLIKE_ALTERNATIVES", 3)
# Training: an update runs when this many samples are ready, or the oldest has waited this long.
TRAIN_BATCH_SIZE = env_int("PARLEY_TRAIN_BATCH_SIZE", ClaimRules.batch_size)
TRAIN_MAX_WAIT_S = env_int("PARLEY_TRAIN_MAX_WAIT_S", int(ClaimRules.max_wait_s))
TRAIN_OVERDUE_S = env_int("PARLEY_TRAIN_OVERDUE_S", 600)  # then it goes first (trainer.turn_order)
TRAIN_ALGORITHM = env_str("PARLEY_TRAIN_ALGORITHM", "combined")
# Overrides of trainer.config.UpdateConfig defaults (empty: the dataclass's own default).
TRAIN_LR = env_float("PARLEY_TRAIN_LR", 0.0) or None
TRAIN_STEPS = env_int("PARLEY_TRAIN_STEPS", 0) or None
# Hint refinement's longest answer (trainer.refine); 0 turns it off; unset: UpdateConfig's 64.
TRAIN_REFINE_MAX_TOKENS = env_int("PARLEY_TRAIN_REFINE_MAX_TOKENS", -1)
# Rewards of an update's answers minus their mean (UpdateConfig.batch_baseline).
TRAIN_BATCH_BASELINE = env_bool("PARLEY_TRAIN_BATCH_BASELINE", UpdateConfig.batch_baseline)
# Updates of different lineages at once across the deployment (Procfile: the train concurrency).
TRAIN_WORKERS = max(1, env_int("PARLEY_TRAIN_WORKERS", 1))
TRAIN_THREADS = env_int("PARLEY_TRAIN_THREADS", 0)  # torch's per worker; 0: what serving leaves
# People one worker trains in one stacked run (trainer.multi_person): 8 on a GPU host, else 1.
TRAIN_PEOPLE_PER_STEP = max(1, env_int("PARLEY_TRAIN_PEOPLE_PER_STEP", 8 if gpu_host() else 1))
# More than 1: each update runs as that many processes, one per GPU (accelerate launch).
TRAIN_PROCESSES = env_int("PARLEY_TRAIN_PROCESSES", 1)
# The probe gate refuses a candidate that is broken or worse, never one that is different:
# KL(candidate ‖ live) per probe answer token (one update's step; no cap on total distance),
GATE_MAX_KL = env_float("PARLEY_GATE_MAX_KL", GateThresholds.max_kl)
# perplexity on general text against the base model,
GATE_MAX_PPL_RATIO = env_float("PARLEY_GATE_MAX_PPL_RATIO", GateThresholds.max_ppl_ratio)
# no more degenerate probe answers (empty, repeating, cut off, mixed scripts) of a kind than the
# base gives, plus this many,
GATE_MAX_DEGENERATE_EXTRA = env_int(
    "PARLEY_GATE_MAX_DEGENERATE_EXTRA", GateThresholds.max_degenerate_extra
)
# looping answers alone may be held to their own allowance (unset: the one above)
GATE_MAX_REPEATING_EXTRA = (
    env_int("PARLEY_GATE_MAX_REPEATING_EXTRA", 0)
    if env_str("PARLEY_GATE_MAX_REPEATING_EXTRA", "")
    else None
)
# and on this many recent judged samples earlier versions trained on, and on this many of the
# newest ones, left for the next update ("fresh": no version trained on them), how much worse
# (nats per token, signed by the feedback) the candidate may score than the live version; the
# older ones decide only when there are no fresh ones.
GATE_HOLDOUT_SAMPLES = env_int("PARLEY_GATE_HOLDOUT_SAMPLES", ClaimRules.holdout)
GATE_FRESH_SAMPLES = env_int("PARLEY_GATE_FRESH_SAMPLES", ClaimRules.fresh)
GATE_MAX_FEEDBACK_DROP = env_float(
    "PARLEY_GATE_MAX_FEEDBACK_DROP", GateThresholds.max_feedback_drop
)
# A refused update gives its samples back; each is retried with the learning rate times this
# factor per refusal, and excluded (with the reason) after this many refusals.
TRAIN_REFUSAL_LR_FACTOR = env_float("PARLEY_TRAIN_REFUSAL_LR_FACTOR", refusals.REFUSAL_LR_FACTOR)
TRAIN_MAX_REFUSALS = env_int("PARLEY_TRAIN_MAX_REFUSALS", refusals.MAX_REFUSALS)

# --- Web ------------------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
WHITENOISE_USE_FINDERS = True
LOGIN_URL = "login"
# Sign-up and password changes refuse short, common, all-digit and username-like passwords.
PASSWORD_MIN_LENGTH = env_int("PARLEY_PASSWORD_MIN_LENGTH", 10)
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": PASSWORD_MIN_LENGTH},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Log-in throttle: this many failures for one username from one address lock that pair out
# for the rest of the window (webapp.core.accounts).
LOGIN_MAX_FAILURES = env_int("PARLEY_LOGIN_MAX_FAILURES", 10)
LOGIN_FAILURE_WINDOW_S = env_int("PARLEY_LOGIN_FAILURE_WINDOW_S", 15 * 60)
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

# Production is served over HTTPS by a TLS-terminating proxy that sets X-Forwarded-Proto;
# embedded and debug mode serve plain http on 127.0.0.1, where none of this may apply.
HTTPS = env_bool("DJANGO_HTTPS", not DEBUG and not EMBEDDED)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if HTTPS else None
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", HTTPS)
# Health checks (compose, load balancers) call /healthz over plain http inside the network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 31_536_000 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", False)
# Joining the browsers' HSTS preload list is a separate request the operator makes and can
# hardly undo, so it stays opt-in and its deploy-check reminder (W021) is off until then.
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]
SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", HTTPS)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# Only the site's own files run or style a page: no inline script, style or handler anywhere
# (htmx's own indicator <style> and eval are turned off in base.html). 'self' covers the chat
# websocket (ws/wss to the same host and port).
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("PARLEY_LOG_LEVEL", "INFO")},
    "loggers": {"httpx": {"level": "WARNING"}},
}
