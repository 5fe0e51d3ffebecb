"""The vision MCP server driven by the official SDK client, in memory, over the session's
loopback vision route: tool contract, evidence, cache, roots, resources."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from jsonschema import Draft202012Validator
from mcp import Client, MCPDeprecationWarning, MCPError
from mcp_types import TextContent

from deepseek_eyes.errors import EvidenceIntegrityError
from deepseek_eyes.home import DataHome
from deepseek_eyes.settings import Settings
from deepseek_eyes.vision.bridge import VisionBridge
from deepseek_eyes.vision.types import Variant
from deepseek_eyes.vision_server import service as service_module
from deepseek_eyes.vision_server.roots import NO_ROOTS, ServedRoots
from deepseek_eyes.vision_server.server import (
    EVIDENCE_URI_PREFIX,
    LOOK_INPUT,
    SEE_INPUT,
    build_vision_server,
    output_schema,
)
from deepseek_eyes.vision_server.service import VisionService
from vision.loopback import LoopbackVisionServer, solid_png

pytestmark = pytest.mark.anyio


class Rig:
    def __init__(self, loopback: LoopbackVisionServer, tag: str) -> None:
        self.loopback = loopback
        self.behaviour = f"healthy~vserve-{tag}"
        settings = Settings.model_validate({"vision": {"routes": [{
            "name": "loop", "base_url": loopback.url(self.behaviour), "model": "vision-1",
        }], "route_priority": ["loop"]}})
        self.home = DataHome.open(settings)
        self.bridge = VisionBridge(settings, self.home)

    @property
    def calls(self) -> int:
        return self.loopback.calls[self.behaviour]

    def service(self, roots: ServedRoots = NO_ROOTS) -> VisionService:
        return VisionService(self.bridge, roots)


@asynccontextmanager
async def rig_of(loopback: LoopbackVisionServer, tag: str) -> AsyncIterator[Rig]:
    rig = Rig(loopback, tag)
    try:
        yield rig
    finally:
        await rig.bridge.aclose()
        rig.home.close()


def text_of(result: Any) -> str:
    assert isinstance(result.content[0], TextContent)
    return str(result.content[0].text)


def error_code(result: Any) -> str:
    assert result.is_error
    return str(json.loads(text_of(result))["error"]["code"])


def valid(value: Any, variant: Variant) -> bool:
    return Draft202012Validator(output_schema(variant)).is_valid(value)


async def test_tools_schemas_and_read_only_annotations(loopback: LoopbackVisionServer) -> None:
    async with rig_of(loopback, "list") as rig, Client(
            build_vision_server(rig.service(), close_on_exit=False), mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert sorted(tools) == ["look", "see"]
        assert tools["see"].input_schema == SEE_INPUT
        assert tools["look"].input_schema == LOOK_INPUT
        assert tools["see"].output_schema == output_schema(Variant.EVIDENCE)
        assert tools["look"].output_schema == output_schema(Variant.TARGET)
        for tool in tools.values():
            assert tool.annotations is not None
            assert tool.annotations.read_only_hint is True
            assert tool.annotations.destructive_hint is False
        Draft202012Validator.check_schema(output_schema(Variant.EVIDENCE))
        assert output_schema(Variant.EVIDENCE)["type"] == "object"
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == [EVIDENCE_URI_PREFIX + "{hash}"]
        with pytest.warns(MCPDeprecationWarning):  # logging is deprecated in 2026-07-28
            await client.set_logging_level("info")  # accepted (MCPServer alone: -32601)


async def test_see_a_path_then_a_cache_hit_by_every_name(
        loopback: LoopbackVisionServer, tmp_path: Path) -> None:
    data = solid_png(40, 30, (200, 30, 30))
    (tmp_path / "shots").mkdir()
    (tmp_path / "shots" / "red.png").write_bytes(data)
    async with rig_of(loopback, "see") as rig, Client(
            build_vision_server(rig.service(ServedRoots.of([tmp_path / "shots"])),
                                close_on_exit=False), mode="legacy") as client:
        first = await client.call_tool("see", {"image": "red.png"})
        assert not first.is_error, text_of(first)
        assert valid(first.structured_content, Variant.EVIDENCE)
        meta = first.meta["deepseekeyes"]  # type: ignore[index]
        assert meta["cached"] is False
        assert meta["image"]["width"] == 40
        text = text_of(first)
        assert text.startswith(f"[{meta['image']['sha256']}: ")
        assert f"summary: {first.structured_content['summary']}" in text  # type: ignore[index]
        assert "look(image=" in text
        calls = rig.calls
        url = "data:image/png;base64," + base64.b64encode(data).decode()
        for name in ("red.png", url, meta["image"]["sha256"]):
            again = await client.call_tool("see", {"image": name})
            assert not again.is_error, text_of(again)
            assert again.meta["deepseekeyes"]["cached"] is True  # type: ignore[index]
            assert again.structured_content == first.structured_content
            # The same rendering (kept, not drawn again), told as from the cache.
            head, tail = text_of(again).rsplit("\n", 1)
            assert head == text.rsplit("\n", 1)[0]
            assert tail.endswith("from the cache)")
        assert rig.calls == calls  # no route was asked again
        attempts = rig.home.db.query("SELECT count(*) AS n FROM attempts")
        assert attempts[0]["n"] >= 1  # the route call was logged, as the CLI's is
        audits = rig.home.db.query(
            "SELECT count(*) AS n FROM audit WHERE kind = 'vision.acquire'")
        assert audits[0]["n"] == 1  # the route call; a hit's one row is its attempt
        hits = rig.home.db.query(
            "SELECT count(*) AS n FROM attempts WHERE phase = 'cache' AND outcome = 'hit'")
        assert hits[0]["n"] == 3
        calls = [json.loads(r["details"]) for r in rig.home.db.query(
            "SELECT details FROM audit WHERE kind = 'vision.call' ORDER BY id")]
        assert [c["image_ref"] for c in calls] == ["path", "path", "data", "sha256"]
        assert [c["cached"] for c in calls] == [False, True, True, True]
        assert all(c["outcome"] == "ok" and c["owner"] == "stdio" for c in calls)
        assert "red.png" not in json.dumps(calls)  # the path only as its hash


async def test_refusals_carry_codes(loopback: LoopbackVisionServer, tmp_path: Path) -> None:
    (tmp_path / "secret.png").write_bytes(solid_png(8, 8))
    (tmp_path / "root").mkdir()
    async with rig_of(loopback, "refuse") as rig, Client(
            build_vision_server(rig.service(ServedRoots.of([tmp_path / "root"])),
                                close_on_exit=False), mode="legacy") as client:
        cases = {
            "../secret.png": "VISION_PATH_OUTSIDE_ROOTS",
            "missing.png": "VISION_PATH_NOT_FOUND",
            "f" * 64: "VISION_IMAGE_NOT_FOUND",
            "data:image/png;base64,@@": "VISION_DATA_URL_INVALID",
            "data:image/png;base64," + base64.b64encode(b"not an image").decode():
                "IMAGE_UNSUPPORTED_FORMAT",
        }
        for image, code in cases.items():
            assert error_code(await client.call_tool("see", {"image": image})) == code, image
        refusals = [json.loads(r["details"]) for r in rig.home.db.query(
            "SELECT details FROM audit WHERE kind = 'vision.call' ORDER BY id")]
        assert [r["code"] for r in refusals] == list(cases.values())
        assert all(r["outcome"] == "refused" for r in refusals)
        wrong_route = await client.call_tool("see", {"image": solid_url(), "route": "nope"})
        assert error_code(wrong_route) == "VISION_ROUTE_UNKNOWN"
        empty = await client.call_tool("look", {"image": solid_url(), "question": "   "})
        assert error_code(empty) == "VISION_QUESTION_INVALID"
        assert rig.calls == 0


def solid_url() -> str:
    return "data:image/png;base64," + base64.b64encode(solid_png(12, 12)).decode()


async def test_no_roots_refuses_paths_but_data_urls_work(
        loopback: LoopbackVisionServer, tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(solid_png(8, 8))
    async with rig_of(loopback, "noroots") as rig, Client(
            build_vision_server(rig.service(), close_on_exit=False), mode="legacy") as client:
        refused = await client.call_tool("see", {"image": str(tmp_path / "a.png")})
        assert error_code(refused) == "VISION_PATH_NO_ROOTS"
        ok = await client.call_tool("see", {"image": solid_url()})
        assert not ok.is_error


async def test_client_roots_are_asked_once_and_refreshed_on_change(
        loopback: LoopbackVisionServer, tmp_path: Path) -> None:
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{name}.png").write_bytes(solid_png(10, 10, (5, 5, 5)))
    offered = [tmp_path / "one"]
    asked: list[int] = []

    async def list_roots(_: Any) -> types.ListRootsResult:
        asked.append(1)
        return types.ListRootsResult(roots=[types.Root(uri=p.as_uri()) for p in offered])

    async with rig_of(loopback, "roots") as rig, Client(
            build_vision_server(rig.service(), close_on_exit=False), mode="legacy",
            list_roots_callback=list_roots) as client:
        one = await client.call_tool("see", {"image": str(tmp_path / "one/one.png")})
        assert not one.is_error, text_of(one)
        two = await client.call_tool("see", {"image": str(tmp_path / "two/two.png")})
        assert error_code(two) == "VISION_PATH_OUTSIDE_ROOTS"
        assert len(asked) == 1  # remembered for the connection
        offered[:] = [tmp_path / "two"]
        with pytest.warns(MCPDeprecationWarning):  # roots are deprecated in 2026-07-28
            await client.send_roots_list_changed()
        for _ in range(100):  # the notification is processed asynchronously; bounded
            result = await client.call_tool("see", {"image": str(tmp_path / "two/two.png")})
            if not result.is_error:
                break
        assert not result.is_error, text_of(result)
        assert len(asked) >= 2


async def test_look_returns_target_evidence(loopback: LoopbackVisionServer) -> None:
    async with rig_of(loopback, "look") as rig, Client(
            build_vision_server(rig.service(), close_on_exit=False), mode="legacy") as client:
        seen = await client.call_tool("see", {"image": solid_url()})
        sha = seen.meta["deepseekeyes"]["image"]["sha256"]  # type: ignore[index]
        looked = await client.call_tool("look", {"image": sha, "question": "What colour?"})
        assert not looked.is_error, text_of(looked)
        assert valid(looked.structured_content, Variant.TARGET)
        assert "answer" in looked.structured_content  # type: ignore[operator]
        assert text_of(looked).splitlines()[1].startswith("answer: ")
        assert looked.meta["deepseekeyes"]["route"] == "loop"  # type: ignore[index]


async def test_look_zooms_into_a_region_at_full_resolution(
    loopback: LoopbackVisionServer,
) -> None:
    async with rig_of(loopback, "zoom") as rig, Client(
            build_vision_server(rig.service(), close_on_exit=False), mode="legacy") as client:
        url = "data:image/png;base64," + base64.b64encode(solid_png(400, 200)).decode()
        seen = await client.call_tool("see", {"image": url})
        sha = seen.meta["deepseekeyes"]["image"]["sha256"]  # type: ignore[index]
        looked = await client.call_tool("look", {"image": sha, "question": "What size?",
                                                 "region": [0.5, 0.5, 0.5, 0.5]})
        assert not looked.is_error, text_of(looked)
        assert valid(looked.structured_content, Variant.TARGET)
        # The loopback route states the size of what it decoded: the crop, full resolution.
        assert looked.structured_content["answer"] == "The image is 200x100 pixels."  # type: ignore[index]
        crop = looked.meta["deepseekeyes"]["image"]  # type: ignore[index]
        assert (crop["width"], crop["height"]) == (200, 100)
        assert crop["sha256"] != sha
        refused = await client.call_tool("look", {"image": sha, "question": "q",
                                                  "region": [0.5, 0.5, 0, 1]})
        assert refused.is_error
        assert error_code(refused) == "VISION_REGION_INVALID"


async def test_evidence_resources_list_page_and_read(
        loopback: LoopbackVisionServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service_module, "PAGE_SIZE", 2)
    async with rig_of(loopback, "res") as rig:
        service = rig.service()
        service.max_listed = 4
        async with Client(build_vision_server(service, close_on_exit=False),
                          mode="legacy", cache=None) as client:
            records = []
            for shade in range(5):
                url = "data:image/png;base64," + base64.b64encode(
                    solid_png(9, 9, (shade * 40, 0, 0))).decode()
                result = await client.call_tool("see", {"image": url})
                records.append(result.meta["deepseekeyes"]["record_sha256"])  # type: ignore[index]
            listed: list[str] = []
            cursor = None
            for _ in range(10):
                page = await client.list_resources(cursor=cursor)
                assert len(page.resources) <= 2
                listed += [str(r.uri) for r in page.resources]
                cursor = page.next_cursor
                if cursor is None:
                    break
            assert listed == [EVIDENCE_URI_PREFIX + r for r in reversed(records)][:4]
            read = await client.read_resource(EVIDENCE_URI_PREFIX + records[0])
            content = read.contents[0]
            assert isinstance(content, types.TextResourceContents)
            assert content.mime_type == "application/json"
            body = json.loads(content.text)
            assert body["record_sha256"] == records[0]
            assert body["key"]["variant"] == Variant.EVIDENCE.value
            assert valid(body["evidence"], Variant.EVIDENCE)
            for uri in (EVIDENCE_URI_PREFIX + "0" * 64, "evidence://sha256/short",
                        "file:///etc/passwd"):
                with pytest.raises(MCPError) as missing:
                    await client.read_resource(uri)
                assert missing.value.error.code == -32002
            with pytest.raises(MCPError):
                await client.list_resources(cursor="not-a-cursor")


async def test_a_tampered_record_is_not_served(loopback: LoopbackVisionServer) -> None:
    async with rig_of(loopback, "tamper") as rig:
        service = rig.service()
        acquisition = await service.see(solid_url())
        digest = acquisition.record.record_sha256
        rig.home.db.execute("DROP TRIGGER evidence_no_update")
        rig.home.db.execute("UPDATE evidence SET record = replace(record, 'summary', 'summarY')"
                            " WHERE record_sha256 = ?", (digest,))
        with pytest.raises(EvidenceIntegrityError) as caught:
            service.record(digest)
        assert caught.value.code == "EVIDENCE_CACHE_TAMPERED"


async def test_a_large_data_url_is_seen(loopback: LoopbackVisionServer) -> None:
    """Over the inline limit (1 MiB), the data URL is decoded in a worker thread."""
    import io
    import random

    from PIL import Image

    noise = Image.frombytes("RGB", (700, 700), random.Random(7).randbytes(700 * 700 * 3))
    buffer = io.BytesIO()
    noise.save(buffer, format="PNG", compress_level=0)
    url = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
    assert len(url) > service_module.INLINE_READ_BYTES
    async with rig_of(loopback, "large") as rig, Client(
            build_vision_server(rig.service(), close_on_exit=False), mode="legacy") as client:
        seen = await client.call_tool("see", {"image": url})
        assert not seen.is_error, text_of(seen)
        assert seen.meta["deepseekeyes"]["image"]["width"] == 700  # type: ignore[index]


async def test_the_data_directory_is_never_served_even_inside_a_root(
    loopback: LoopbackVisionServer, tmp_path: Path, isolated_home: Path
) -> None:
    assert isolated_home.is_relative_to(tmp_path)
    async with rig_of(loopback, "datahome") as rig:
        rig.home.audit_keys()  # the keyring exists
        rig.home.blobs.put(solid_png(9, 9))
        blob = next(p for p in (isolated_home / "blobs").rglob("*") if p.is_file())
        (tmp_path / "via-link.png").symlink_to(blob)
        (tmp_path / "home-link").symlink_to(isolated_home)
        inside = blob.relative_to(isolated_home)
        async with Client(build_vision_server(rig.service(ServedRoots.of([tmp_path])),
                                              close_on_exit=False), mode="legacy") as client:
            for image in (str(blob), "eyes-home/audit/keyring.json", "via-link.png",
                          "home-link/audit/keyring.json", f"sub/../eyes-home/{inside}",
                          str(tmp_path / "eyes-home" / "eyes.db")):
                result = await client.call_tool("see", {"image": image})
                assert error_code(result) == "VISION_PATH_OUTSIDE_ROOTS", image
                message = json.loads(text_of(result))["error"]["message"]
                assert "never served" in message, image
            assert rig.calls == 0  # nothing in the data directory was read or sent
            # Outside the data directory the same root still serves.
            (tmp_path / "fine.png").write_bytes(solid_png(10, 10))
            assert not (await client.call_tool("see", {"image": "fine.png"})).is_error
            assert rig.calls > 0
