from __future__ import annotations

import httpx

from topology import Topology


def test_smoke(replicas: Topology) -> None:
    seen = []
    for i in range(6):
        r = httpx.post(f"{replicas.base_url}/chat/completions", headers=replicas.headers,
                       json={"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": f"hi {i}"}]}, timeout=30)
        assert r.status_code == 200, r.text
        seen.append(replicas.served_by(r.headers))
    print(seen, replicas.states())
