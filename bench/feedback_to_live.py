"""From the last feedback click to the new version live, for a batch of 8 samples.

    python -m bench.feedback_to_live [--batch 8]

Eight answers are generated first (not timed); then 8 👎+comment feedbacks are sent, and the
clock runs from the last one until /v1/models reports a new live version. Target: under 60 s
with the 135M model and LoRA on this machine.
"""

from __future__ import annotations

import argparse
import json
import time

import httpx

from bench.common import record, running_system

PROMPTS = [
    "Name a colour.",
    "What is 2+2?",
    "Say hello.",
    "Name a fruit.",
    "What is ice?",
    "Name an animal.",
    "What day follows Monday?",
    "Name a city.",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    with running_system({"PARLEY_TRAIN_BATCH_SIZE": str(args.batch)}) as system:
        headers = {"Authorization": f"Bearer {system.api_key}"}
        ids = []
        with httpx.Client(base_url=system.web_url, headers=headers, timeout=300) as client:
            for index in range(args.batch):
                body = {
                    "model": "parley",
                    "max_tokens": 32,
                    "messages": [{"role": "user", "content": PROMPTS[index % len(PROMPTS)]}],
                }
                ids.append(client.post("/v1/chat/completions", json=body).json()["id"])
            version_before = client.get("/v1/models").json()["data"][0]["parley_version"]
            for completion_id in ids:
                client.post(
                    "/v1/feedback",
                    json={
                        "completion_id": completion_id,
                        "rating": -1,
                        "comment": "Start your answer with 'Sure!'",
                    },
                )
            clicked = time.monotonic()
            while True:
                version = client.get("/v1/models").json()["data"][0]["parley_version"]
                if version != version_before:
                    break
                if time.monotonic() - clicked > 1800:
                    raise SystemExit("no new version within 30 minutes")
                time.sleep(0.5)
            latency = time.monotonic() - clicked
    print(
        f"\nlast feedback → {version} live: {latency:.1f} s (target < 60 s), batch of {args.batch}"
    )
    record("feedback_to_live", {"batch": args.batch, "seconds": latency, "version": version})
    print(json.dumps({"seconds": round(latency, 1)}))


if __name__ == "__main__":
    main()
