#!/bin/sh
# Install LiteLLM's proxy server into benchmarks/.litellm-proxy (never committed), for
# `python -m benchmarks.gateway`. The proxy ships inside the litellm wheel, but the wheel's
# `proxy` extra pins a litellm-proxy package the registry here lacks (and exact .post1
# builds of litellm-proxy-extras and litellm-enterprise), so the extra's other requirements
# are installed directly, as the litellm wheel's METADATA lists them.
set -e
cd "$(dirname "$0")"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
"$PYTHON" -m venv .litellm-proxy
.litellm-proxy/bin/python -m pip install --quiet --upgrade pip
.litellm-proxy/bin/python -m pip install --quiet \
  "litellm==1.110.2" \
  "gunicorn>=23.0.0,<24.0" "uvicorn>=0.33.0,<1.0" "uvloop>=0.22.1,<1.0" \
  "fastapi>=0.136.3,<1.0" "starlette>=1.0.1,<2.0" "backoff>=2.2.1,<3.0" "pyyaml>=6.0.3,<7.0" \
  "rq>=2.7.0,<3.0" "orjson>=3.11.6,<4.0" "hiredis>=3.0.0,<4.0" "apscheduler>=3.11.2,<4.0" \
  "fastapi-sso>=0.19.0,<1.0" "pyjwt>=2.13.0,<3.0" "python-multipart>=0.0.27,<1.0" \
  "cryptography>=49.0.0,<51.0" "pynacl>=1.6.2,<2.0" "websockets>=15.0.1,<16.0" \
  "mcp>=2.3.0,<3" "pydantic>=2.12.0,<3" "litellm-proxy-extras" "litellm-enterprise" \
  "restrictedpython>=8.5,<9.0" "rich>=13.9.4,<14.0" "tomlkit>=0.13.3,<1.0" \
  "semver>=3.0.4,<4" "granian>=2.7.4,<3.0" "boto3>=1.43.117,<2.0" \
  "azure-identity>=1.25.2,<2.0" "azure-storage-blob>=12.28.0,<13.0" "httpx2>=2.10.0,<3" \
  "inquirerpy>=0.3.4,<1.0" "polars>=1.38.1,<2.0" "soundfile>=0.12.1,<1.0" \
  "pyroscope-io>=0.8.16,<1.0" "expression>=5.6.0,<6.0" "backports-zstd>=1.0.0,<2.0" \
  "prometheus-client" "redis>=5"
.litellm-proxy/bin/litellm --version
