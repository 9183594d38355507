"""Pure-Python CPU: each request sums squares for a few milliseconds. Known answer:
cpu in one process (a sync worker), gil among the threads of one (gthread); in
crunch_numbers."""


def crunch_numbers(n: int = 40_000) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def app(environ, start_response):
    body = b"%d\n" % crunch_numbers()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
