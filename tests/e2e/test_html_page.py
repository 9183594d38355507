"""`bench --html` on the real stacks, opened in a real headless browser with no network.

A short real race (gunicorn-sync and uvicorn on /io, two levels) writes the page and
the run file; Chromium (Debian's, as tests/e2e/test_web.py drives it) opens the page
from the file over the DevTools protocol with every host but this machine unresolvable
and a dead proxy. Nothing may be requested but the file itself; both stacks' charts must
be drawn (their p99 over time among them), the breaking point marked on exactly the
stacks the run file says broke, and a pointer over a chart must show its values.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import tempfile
from pathlib import Path

import aiohttp
import pytest

from tests.e2e.test_web import CHROMIUM, CHROMIUM_FLAGS, Cdp
from tests.helpers import run_cli

pytestmark = pytest.mark.slow

DRAWN = """(() => {
  const figs = [...document.querySelectorAll('figure')];
  return JSON.stringify({
    stacks: [...new Set(figs.map(f => f.dataset.stack))],
    p99: figs.filter(f => f.querySelector('path[data-name="p99"]')).map(f => f.dataset.stack),
    marked: [...new Set(figs.filter(f => f.querySelector('.mark')).map(f => f.dataset.stack))],
    paths: document.querySelectorAll('path.line').length,
    rows: document.querySelectorAll('table tbody tr').length,
    width: document.querySelector('svg.chart').getBoundingClientRect().width,
  });
})()"""

HOVER = """(() => {
  const s = [...document.querySelectorAll('svg.chart')].find(
    c => c.querySelector('path[data-name="p99"]'));
  const r = s.getBoundingClientRect();
  s.dispatchEvent(new PointerEvent('pointermove', {clientX: r.left + r.width * 0.5,
    clientY: r.top + r.height / 2, bubbles: true}));
  return document.getElementById('tip').textContent;
})()"""


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
async def test_a_real_report_opens_offline_and_draws_both_stacks(tmp_path: Path) -> None:
    page, run_file = tmp_path / "r.html", tmp_path / "r.json"
    r = await asyncio.to_thread(
        run_cli,
        *("bench", "--stacks", "gunicorn-sync,uvicorn", "--workload", "io"),
        *("--concurrency", "10,100", "--duration", "2s", "--no-progress"),
        *("--html", str(page), "--json", str(run_file)),
        timeout=300,
    )
    assert r.returncode in (0, 1), r.stderr  # 1: a stack broke, as gunicorn-sync does
    run = json.loads(run_file.read_text())
    broke = sorted(st["name"] for st in run["stacks"] if st["breaking_point"] is not None)
    assert all(st["series"]["t"] for st in run["stacks"])

    profile = tempfile.mkdtemp(prefix="stackrace-chromium-")
    assert CHROMIUM is not None
    browser = subprocess.Popen(
        [CHROMIUM, *CHROMIUM_FLAGS, "--remote-debugging-port=0", f"--user-data-dir={profile}",
         "--window-size=1200,900", "about:blank"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        active = Path(profile) / "DevToolsActivePort"
        for _ in range(300):
            if active.exists() and active.read_text().strip():
                break
            await asyncio.sleep(0.1)
        devtools = int(active.read_text().split()[0])
        async with aiohttp.ClientSession() as http:
            async with http.put(f"http://127.0.0.1:{devtools}/json/new?about:blank") as resp:
                target = await resp.json()
            async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                cdp = Cdp(ws)
                await cdp.call("Page.enable")
                await cdp.call("Network.enable")
                await cdp.call("Page.navigate", url=page.as_uri())
                drawn: dict = {}
                for _ in range(100):
                    res = await cdp.call("Runtime.evaluate", expression="document.readyState")
                    if res["result"].get("value") == "complete":
                        res = await cdp.call("Runtime.evaluate", expression=DRAWN)
                        drawn = json.loads(res["result"]["value"])
                        break
                    await asyncio.sleep(0.1)
                tip = (await cdp.call("Runtime.evaluate", expression=HOVER))["result"]["value"]
                await cdp.call("Runtime.evaluate", expression="1")  # events up to here
    finally:
        browser.terminate()
        browser.wait(10)
    # the file itself, and nothing else: no font, script, image or any other URL
    assert page.as_uri() in cdp.requested, cdp.requested  # (the requests were seen)
    assert [u for u in cdp.requested if not u.startswith("file://")] == []
    assert drawn["stacks"] == ["gunicorn-sync", "uvicorn"]
    assert drawn["p99"] == ["gunicorn-sync", "uvicorn"]
    assert sorted(drawn["marked"]) == broke
    assert drawn["paths"] >= 2 * 8 and drawn["rows"] == 4 and drawn["width"] > 100
    # the pointer over a latency chart: the second, and the three percentiles' values
    assert " s\n" in tip and "p99: " in tip and " ms" in tip, tip
