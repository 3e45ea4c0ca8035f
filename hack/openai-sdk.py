"""The OpenAI Python SDK against `aigw emulator`'s data plane.

Seeds a fallback config (a failing target, then a healthy one) and an API key bound to it, calls
chat.completions and responses through the SDK with the key in `x-portkey-api-key`, checks that
an unknown key raises AuthenticationError, then reads the requests back through the telemetry
routes. Run it through hack/openai-sdk.sh, or against a running emulator:

    AIGW_EMULATOR_URL=http://127.0.0.1:8787 AIGW_EMULATOR_TOKEN=dev-token python3 hack/openai-sdk.py
"""
import datetime
import json
import os
import urllib.parse
import urllib.request

import openai

BASE = os.environ.get("AIGW_EMULATOR_URL", "http://127.0.0.1:8787")
TOKEN = os.environ["AIGW_EMULATOR_TOKEN"]
KEY_ID = "5d0c0e7e-0000-4000-8000-0000000000aa"


def call(method, path, body=None, token=None):
    request = urllib.request.Request(BASE + path, method=method)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    data = None if body is None else json.dumps(body).encode()
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, data) as response:
        return json.load(response)


call("POST", "/_emulator/seed", {
    "configs": [{"slug": "pc-sdk", "name": "sdk", "config": {
        "strategy": {"mode": "fallback"},
        "targets": [{"provider": "@openai-broken"},
                    {"provider": "@openai-ok", "override_params": {"model": "gpt-4o-mini"}}]}}],
    "api_keys": [{"id": KEY_ID, "key": "ak-sdk", "workspace_id": "ws-sdk",
                  "defaults": {"config_id": "pc-sdk", "metadata": {"app": "sdk-demo"}}}],
})
call("PUT", "/_emulator/faults", {"gateway_seed": 1, "providers": {
    "openai-broken": {"error_rate": 1.0, "status": 503, "latency_ms": 20}}})

client = openai.OpenAI(base_url=BASE + "/v1", api_key="unused-by-the-gateway",
                       default_headers={"x-portkey-api-key": "ak-sdk"}, max_retries=0)
completion = client.chat.completions.with_raw_response.create(
    model="gpt-4o", messages=[{"role": "user", "content": "Hello from the OpenAI SDK"}])
parsed = completion.parse()
print("chat.completions:", parsed.model, "|", parsed.choices[0].message.content,
      "| served by", completion.headers.get("x-portkey-provider"),
      "| tokens", parsed.usage.total_tokens)

response = client.responses.create(model="gpt-4o", input="And hello through responses")
print("responses:", response.id, "|", response.status, "|", response.output_text)

try:
    openai.OpenAI(base_url=BASE + "/v1", api_key="x", max_retries=0,
                  default_headers={"x-portkey-api-key": "ak-wrong"}).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    raise SystemExit("an unknown key was accepted")
except openai.AuthenticationError as error:
    print("unknown key:", error.status_code, error.body["message"] if error.body else error)

now = datetime.datetime.now(datetime.timezone.utc)
window = {
    "organisationId": "1234567890", "workspaceSlug": "ws-sdk", "apiKeyIds": KEY_ID,
    "timeOfGenerationMin": (now - datetime.timedelta(minutes=10)).isoformat(timespec="seconds"),
    "timeOfGenerationMax": (now + datetime.timedelta(minutes=1)).isoformat(timespec="seconds"),
}
query = urllib.parse.urlencode(window)
groups = call("GET", f"/ai_gw/v2/logs/groups/provider?{query}&columns=avg_latency,success_rate",
              token=TOKEN)
print("telemetry groups/provider:", json.dumps(groups["data"]))
latency = call("GET", f"/ai_gw/v2/logs/charts/latency?{query}", token=TOKEN)["data"]
print("telemetry charts/latency: p50", latency["p50"], "p90", latency["p90"], "mean", latency["total"])
