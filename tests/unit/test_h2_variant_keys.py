"""The `http` variant key (stackrace.stacks.protocols): the stacks that serve HTTP/2 take
`:http=2` and `:http=h2c` as their blocks declare, the mode's command, files and TLS are
the stack's own spec from then on, a stack that cannot refuses in one line naming the
stack and the key, and a stacks file's modes are checked when it is read. Real servers
answering over h2: tests/integration/test_h2_variants.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackrace.stacks import protocols
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.definition import ConfigError
from stackrace.stacks.validate import stack_defs
from stackrace.stacks.variants import resolve

STACKS = load_stacks()
# every shipped stack with an h2 variant, and the modes it declares
H2_STACKS = {
    "hypercorn": ["2", "h2c"],
    "granian-asgi": ["2", "h2c"],
    "granian-wsgi": ["2", "h2c"],
    "uvicorn": ["2", "h2c"],
    "go-nethttp": ["2", "h2c"],
    "node-http": ["2", "h2c"],
    "nginx-proxy": ["2", "h2c"],
    "nginx-uwsgi": ["2", "h2c"],
    "nginx-tls": ["2"],
}


def test_the_shipped_h2_stacks_are_those_the_issue_names():
    served = {n: protocols.served(s)[1:] for n, s in STACKS.items() if s.http}
    assert served == H2_STACKS


@pytest.mark.parametrize("name", sorted(H2_STACKS))
def test_each_mode_is_the_stacks_own_spec_tls_for_2_and_clear_for_h2c(name: str):
    plain = resolve(name, STACKS)
    assert plain.http == "1.1" and plain.name == name
    for mode in H2_STACKS[name]:
        stack = resolve(f"{name}:http={mode}", STACKS)
        assert stack.http == mode and stack.name == f"{name}:http={mode}"
        assert stack.spec.tls is (mode == "2")
        assert protocols.engine_http(stack) == "2"
        # the mode changed what runs (its command or a file), or its TLS; Hypercorn's
        # h2c alone runs as HTTP/1.1 does: it takes prior knowledge on a plain port
        changed = (stack.spec.command, stack.spec.files) != (plain.spec.command, plain.spec.files)
        assert changed or stack.spec.tls != plain.spec.tls or (name, mode) == ("hypercorn", "h2c")


def test_hypercorn_over_tls_gets_the_certificate_and_h2c_its_plain_command():
    tls = resolve("hypercorn:http=2", STACKS).spec
    assert "--certfile" in tls.command and "{tls_cert}" in tls.command
    clear = resolve("hypercorn:http=h2c", STACKS).spec
    assert clear.command == STACKS["hypercorn"].command and not clear.tls


def test_nginx_modes_replace_the_listen_file_only():
    plain = resolve("nginx-proxy", STACKS).spec
    h2 = resolve("nginx-proxy:http=2", STACKS).spec
    assert plain.command == h2.command
    listen = {f.path: f.template for f in h2.files}
    assert listen["listen.conf"].endswith("listen-h2.conf.tmpl")
    assert listen["nginx.conf"] == {f.path: f.template for f in plain.files}["nginx.conf"]
    assert len(h2.files) == len(plain.files)


def test_1_1_is_the_stack_as_named():
    stack = resolve("gunicorn-sync:http=1.1", STACKS)
    assert stack.name == "gunicorn-sync" and stack.http == "1.1" and not stack.overrides


@pytest.mark.parametrize(
    ("ref", "said"),
    [
        ("gunicorn-sync:http=2", "gunicorn-sync does not serve h2 (TLS) (it serves 1.1)"),
        ("nginx-tls:http=h2c", "nginx-tls does not serve h2c (cleartext) (it serves 1.1, 2)"),
        ("hypercorn:http=3", "'3' is not one of 1.1, 2, h2c"),
        ("uvicorn-tls:http=h2c", "uvicorn-tls does not serve h2c"),
    ],
)
def test_a_stack_that_cannot_refuses_in_one_line_naming_stack_and_key(ref: str, said: str):
    with pytest.raises(ConfigError) as err:
        resolve(ref, STACKS)
    line = str(err.value)
    assert "\n" not in line
    assert f"stack '{ref}'" in line and "key 'http'" in line and said in line


def test_http_is_named_among_the_keys_a_variant_may_set():
    with pytest.raises(ConfigError, match=r"not tunable \(workers, threads, http"):
        resolve("hypercorn:protocol=2", STACKS)


BLOCK = """
[stacks.mine]
command = ["/bin/server", "--port", "{port}"]
"""


def _read(tmp_path: Path, text: str):
    import tomllib

    p = tmp_path / "stacks.toml"
    p.write_text(text)
    return stack_defs(tomllib.loads(text), p)


def test_a_stacks_files_modes_are_checked_when_it_is_read(tmp_path: Path):
    ok = _read(
        tmp_path,
        BLOCK + '[stacks.mine.http."2"]\ncommand = ["/bin/server", "--cert", "{tls_cert}"]\n',
    )
    assert list(ok["mine"].http) == ["2"]
    with pytest.raises(ConfigError, match=r"stack 'mine': key 'http.3': not an HTTP mode"):
        _read(tmp_path, BLOCK + '[stacks.mine.http."3"]\n')
    # h2c is cleartext: the certificate is not one of its placeholders
    with pytest.raises(ConfigError, match=r"key 'http.h2c.command\[1\]': unknown placeholder"):
        _read(tmp_path, BLOCK + '[stacks.mine.http.h2c]\ncommand = ["/bin/server", "{tls_key}"]\n')
    with pytest.raises(ConfigError, match=r"key 'http.2.command': must not be empty"):
        _read(tmp_path, BLOCK + '[stacks.mine.http."2"]\ncommand = []\n')
    with pytest.raises(ConfigError, match=r"key 'params.http': cannot be a param name"):
        _read(tmp_path, BLOCK + 'params = { http = "2" }\n')


def test_a_recorded_members_protocol_is_read_back_from_its_name():
    """A replay's members are names: the pane says the protocol the race spoke."""
    assert protocols.named_http("hypercorn:http=2") == "2"
    assert protocols.named_http("hypercorn:workers=2,http=h2c") == "h2c"
    assert protocols.named_http("hypercorn") == "1.1"
    # a backend's variant is the backend's, not the front's
    assert protocols.named_http("nginx-proxy:backend=hypercorn:http=2") == "1.1"
    assert protocols.named_http("x:http=9") == "1.1"
