"""Deterministic combined-format access logs (authoring helper; a copy lives in the tests)."""
import random
import sys


def access_log(seed: int, n: int) -> str:
    rng = random.Random(seed)
    ips = [f"10.0.{rng.randrange(4)}.{rng.randrange(1, 40)}" for _ in range(12)] + ["192.168.7.3", "172.16.0.21"]
    paths = ["/", "/index.html", "/api/v1/items", "/api/v1/items/42", "/login", "/static/app.js",
             "/static/style.css", "/favicon.ico", "/search?q=a+b", "/admin"]
    agents = ['Mozilla/5.0 (X11; Linux x86_64) Firefox/123.0', 'curl/8.5.0', 'Go-http-client/1.1',
              'Mozilla/5.0 (iPhone; CPU iPhone OS 17_3 like Mac OS X)']
    statuses = [200] * 30 + [304] * 6 + [404] * 5 + [301, 302, 403, 500, 502, 503, 401]
    lines = []
    for i in range(n):
        ip = rng.choice(ips)
        sec = i * 7 + rng.randrange(7)
        ts = f"{5 + sec // 86400:02d}/Mar/2024:{sec // 3600 % 24:02d}:{sec // 60 % 60:02d}:{sec % 60:02d} +0000"
        if rng.random() < 0.03:
            req, status, size = "-", 400, "0"
        else:
            method = rng.choice(["GET"] * 8 + ["POST", "HEAD"])
            req, status = f"{method} {rng.choice(paths)} HTTP/1.1", rng.choice(statuses)
            size = "-" if status == 304 or method == "HEAD" else str(rng.randrange(100, 60000))
        ref = rng.choice(['-', 'https://example.com/', 'https://example.com/search?q=x+y'])
        lines.append(f'{ip} - - [{ts}] "{req}" {status} {size} "{ref}" "{rng.choice(agents)}"')
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(access_log(int(sys.argv[1]), int(sys.argv[2])))
