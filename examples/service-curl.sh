#!/usr/bin/env bash
# Calls a running rate-limit service (`npm start`, or `sluice serve`) with curl; SLUICE_URL says where it listens.
set -euo pipefail
url="${SLUICE_URL:-http://127.0.0.1:8080}"

# Five failed logins for alice at once (the "login" policy allows 5 in 15 minutes): 200, nothing left.
curl -s -d '{"policy":"login","key":"alice","cost":5}' "$url/v1/limit"
echo
# One more: 429, with the headers to forward and the problem body to send.
curl -s -i -d '{"policy":"login","key":"alice"}' "$url/v1/limit"
echo
# A bad request is refused with 400 and counts nothing.
curl -s -o /dev/null -w '%{http_code}\n' -d '{"policy":"login","key":"alice","cost":0}' "$url/v1/limit"
