"""Which environment variable names a template or a job may set.

RESERVED: what Vertex AI (and the local backend, which copies it) sets on every
replica. Nobody sets these: a template's TF_CONFIG or AIP_MODEL_DIR would send a
replica into another job's cluster or output folder.

STARTUP: names that change how a loader, interpreter, shell or network library
starts, i.e. run code or load libraries the template did not name (LD_PRELOAD,
PYTHONPATH, PYTHONWARNINGS and BROWSER, PERL5OPT, NODE_OPTIONS, BASH_ENV,
GCONV_PATH, GLIBC_TUNABLES, HOME for user site-packages, proxies that would carry
the job's cloud credentials ...). Only an admin sets these (a template, or an
admin's own overrides); a template may not fill them from parameters, whose values
members choose. Names are compared upper-cased (curl reads http_proxy).

A list of bad names will always miss one, so this list is the second line: what a
member may set at all is an allow-list per template (jobspec.overridable.env_outside:
the names the template sets itself, or names its `overridable` lists one by one).
The list still covers families, by prefix and by suffix (every *_PROXY, every
*_EMULATOR_HOST, every CUDA/NVTX *_INJECTION*_PATH, pip's and uv's settings,
Kerberos', gRPC's ...), so that even an admin's template that opens a name to
members cannot open one of these."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from service.core.errors import Problem
from service.jobspec import parameters as params

RESERVED_NAMES = frozenset({"TF_CONFIG", "CLUSTER_SPEC"})
RESERVED_PREFIXES = ("AIP_", "CLOUD_ML_", "TRAINJOBS_")

STARTUP_NAMES = frozenset({
    # shells
    "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "IFS", "CDPATH", "ZDOTDIR",
    # glibc's list of variables it drops for setuid programs, and its tunables
    "GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "NIS_PATH",
    "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TMPDIR", "TZDIR",
    # where programs, user site-packages and dotfiles are found
    "PATH", "HOME",
    # programs that libraries start on their own
    "BROWSER", "EDITOR", "VISUAL", "PAGER", "MANPAGER", "LESSOPEN", "LESSCLOSE", "TERMINFO", "TERMINFO_DIRS",
    # other interpreters' start-up hooks
    "NODE_OPTIONS", "NODE_PATH", "RUBYOPT", "RUBYLIB", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS", "CLASSPATH", "PHPRC", "PHP_INI_SCAN_DIR", "LUA_INIT", "LUA_PATH", "LUA_CPATH",
    "R_PROFILE", "R_PROFILE_USER", "R_ENVIRON", "R_ENVIRON_USER",
    # libraries loaded by name from the environment
    "OPENSSL_CONF", "OPENSSL_ENGINES", "OPENSSL_MODULES", "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN",
    "NCCL_PROFILER_PLUGIN", "TF_PLUGGABLE_DEVICE_LIBRARY_PATH", "MPLBACKEND",
    # where credentials, tokens and trusted certificates come from, and where traffic goes
    "GOOGLE_APPLICATION_CREDENTIALS", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
    "NETRC", "WGETRC", "CURL_HOME", "KUBECONFIG", "BOTO_CONFIG", "BOTO_PATH", "DOCKER_CONFIG", "DOCKER_HOST",
    "GNUPGHOME", "SSH_AUTH_SOCK", "SSH_ASKPASS", "SUDO_ASKPASS", "HF_ENDPOINT", "HF_HOME", "TRANSFORMERS_CACHE",
    "TFHUB_CACHE_DIR", "TORCH_HOME", "OMP_TOOL", "KRB5CCNAME", "KRB5_CONFIG", "KRB5_KTNAME", "STORAGE_EMULATOR_HOST",
    "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "OMP_TOOL_LIBRARIES", "PIP_INDEX_URL", "GRPC_PROXY",
})
STARTUP_PREFIXES = ("LD_", "DYLD_", "PYTHON", "PERL", "RUBY", "BASH_FUNC_", "MALLOC_", "GLIBC_", "GCE_METADATA_",
                    "CLOUDSDK_", "GIT_", "XDG_", "NODE_", "JAVA_",
                    # profilers and tracers loaded into the process (CUDA_INJECTION64_PATH, OMP_TOOL_LIBRARIES)
                    "CUDA_INJECTION", "NVTX_INJECTION", "OMP_TOOL", "KMP_", "ROCP_", "HSA_TOOLS",
                    # package indexes and their config (a job that installs at start runs their code)
                    "PIP_", "UV_", "CONDA_", "PYPI_", "NPM_CONFIG_", "YARN_", "POETRY_",
                    # credentials, realms, proxies and endpoints of clients in the image
                    "KRB5", "GRPC_", "GOOGLE_", "GCLOUD_", "GSUTIL_", "AWS_", "AZURE_", "SSL_", "HTTPLIB2_",
                    "REQUESTS_", "CURL_", "OPENSSL_", "HF_", "HUGGINGFACE_", "TFDS_", "WANDB_", "MLFLOW_")
STARTUP_SUFFIXES = ("_PROXY", "_EMULATOR_HOST", "_INJECTION64_PATH", "_INJECTION32_PATH", "_INJECTION_PATH",
                    "_PRELOAD", "_LIBRARY_PATH", "_PLUGIN", "_PLUGIN_PATH", "_CA_BUNDLE", "_CA_CERTS", "_ENDPOINT",
                    "_API_ENDPOINT", "_CREDENTIALS", "_CONFIG_FILE", "_RC")
# PYTHON* that only change buffering, hashing, bytecode files or text encoding.
HARMLESS = frozenset({"PYTHONUNBUFFERED", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONUTF8",
                      "PYTHONIOENCODING", "PYTHONFAULTHANDLER"})


def is_reserved(name: str) -> bool:
    upper = name.upper()
    return upper in RESERVED_NAMES or upper.startswith(RESERVED_PREFIXES)


def is_startup(name: str) -> bool:
    upper = name.upper()
    if upper in HARMLESS:
        return False
    return upper in STARTUP_NAMES or upper.startswith(STARTUP_PREFIXES) or upper.endswith(STARTUP_SUFFIXES)


def env_entries(spec: dict) -> Iterator[tuple[str, str, Any]]:
    """(field, name, value) of every env variable in a spec as a dict (as stored or merged)."""
    if not isinstance(spec, dict):
        return
    places = [("container", spec.get("container"))]
    places += [(f"{role}.container", (spec.get(role) or {}).get("container") if isinstance(spec.get(role), dict)
                else None) for role in ("chief", "workers", "parameter_servers", "evaluator")]
    for where, container in places:
        env = container.get("env") if isinstance(container, dict) else None
        if isinstance(env, dict):
            for name, value in env.items():
                yield f"{where}.env.{name}", str(name), value


def _reserved_problem(field: str, name: str) -> Problem:
    return Problem(field, f"{name} is set by the service on every replica (as Vertex AI sets it); "
                   "no template or job may set it", "remove it; the replica gets the service's value")


def _startup_problem(field: str, name: str) -> Problem:
    return Problem(field, f"{name} changes how a program, loader or library starts (or where its "
                   "credentials and traffic go); only an admin may set, change or remove it, "
                   "normally in the template", "leave it as the template has it, or ask an admin of your team")


def check_template_env(spec: dict, declared: list) -> list[Problem]:
    """A template as stored: no reserved names; startup names only with values members
    cannot choose (a parameter may fill one only if it declares choices)."""
    open_params = {p.name for p in declared if p.choices is None}
    problems = reserved_problems(spec)
    for field, name, value in env_entries(spec):
        if is_startup(name) and isinstance(value, str) and params.references(value) & open_params:
            problems.append(Problem(field, f"{name} changes how a program starts, and its value comes from a "
                                    "parameter without choices, which any member could set to anything",
                                    "give the parameter a list of choices, or write a fixed value"))
    return problems


def reserved_problems(spec: dict) -> list[Problem]:
    """Reserved names anywhere in a spec: refused for everyone, admins included."""
    return [_reserved_problem(field, name) for field, name, _ in env_entries(spec) if is_reserved(name)]


def startup_changes(template_spec: dict, merged_spec: dict) -> list[Problem]:
    """Startup names a job's overrides set, change or remove: only an admin may."""
    before = {field: (name, value) for field, name, value in env_entries(template_spec) if is_startup(name)}
    after = {field: (name, value) for field, name, value in env_entries(merged_spec) if is_startup(name)}
    changed = [(f, nv[0]) for f, nv in after.items() if before.get(f) != nv]
    changed += [(f, nv[0]) for f, nv in before.items() if f not in after]
    return [_startup_problem(field, name) for field, name in changed]
