"""Images in the prompt, as the core judges them: the media type from the bytes (never the name), the size in
pixels from the header, the API's limits with a one-line reason, and the exact block the model gets."""

from __future__ import annotations

import base64
import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from desktop_app.core import (
    MAX_IMAGE_BYTES,
    MAX_IMAGES_PER_MESSAGE,
    ImageRefused,
    PromptImage,
    StoredMessage,
    check_prompt_images,
    history_image_sizes,
    image_block,
    image_of_block,
    read_prompt_image,
)
from desktop_app.core._compaction import estimate_tokens
from desktop_app.core._prompt_images import sniff_media_type
from tests.kit.pictures import gif, jpeg, png, webp, webp_vp8x

FORMATS = [(png, "image/png"), (jpeg, "image/jpeg"), (webp, "image/webp")]


@pytest.mark.parametrize(("make", "media_type"), FORMATS)
@pytest.mark.parametrize(("w", "h"), [(1, 1), (37, 21), (640, 3)])
def test_each_format_is_known_by_its_bytes_with_its_size(make, media_type, w, h) -> None:
    data = make(w, h)
    img = read_prompt_image(data, "shot.txt")  # the name says nothing: the bytes do
    assert (img.media_type, img.width, img.height, img.size) == (media_type, w, h, len(data))
    assert img.sha256 == hashlib.sha256(data).hexdigest()


def test_gif_and_extended_webp_headers() -> None:
    assert (read_prompt_image(gif(300, 200)).width, read_prompt_image(gif(300, 200)).height) == (300, 200)
    head = webp_vp8x(5000, 1200)
    assert sniff_media_type(head) == "image/webp"
    img = read_prompt_image(head)
    assert (img.width, img.height) == (5000, 1200)


def test_a_name_that_lies_does_not_change_the_media_type() -> None:
    assert read_prompt_image(png(4, 4), "photo.jpg").media_type == "image/png"
    assert read_prompt_image(jpeg(4, 4), "diagram.png").media_type == "image/jpeg"


@pytest.mark.parametrize(("data", "says"), [
    (b"", "it is empty"),
    (b"just some text, not a picture\n", "not PNG, JPEG, GIF or WebP"),
    (b"BM" + bytes(60), "not PNG, JPEG, GIF or WebP"),  # a BMP: the API does not take it
    (b"%PDF-1.7\n", "not PNG, JPEG, GIF or WebP"),
    (b"\x89PNG\r\n\x1a\n\x00\x00", "header is damaged or cut short"),
    (b"\xff\xd8\xff\xe0\x00\x10JFIF", "header is damaged or cut short"),
    (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "header is damaged or cut short"),
    (b"GIF89a\x00\x00\x05\x00", "header is damaged or cut short"),  # zero width
])
def test_refusals_say_why_in_one_line(data: bytes, says: str) -> None:
    with pytest.raises(ImageRefused) as e:
        read_prompt_image(data, "bad.png")
    assert says in str(e.value) and str(e.value).startswith("bad.png was not attached")
    assert "\n" not in str(e.value)


def test_too_large_and_too_wide_are_refused() -> None:
    big = png(8, 8) + bytes(MAX_IMAGE_BYTES)  # a valid head followed by more bytes than the API takes
    with pytest.raises(ImageRefused, match=r"over the 3\.75 MB an image may have \(5 MB once base64-encoded\)"):
        read_prompt_image(big, "big.png")
    with pytest.raises(ImageRefused, match=r"8001×2 px is over the 8000 px a side"):
        read_prompt_image(png(8001, 2), "wide.png")
    assert read_prompt_image(png(8000, 1)).width == 8000  # the limit itself is fine


def test_base64_of_the_largest_accepted_image_fits_the_api_cap() -> None:
    assert len(base64.b64encode(bytes(MAX_IMAGE_BYTES))) == 5 * 1024 * 1024


def _img(w: int = 10, h: int = 10) -> PromptImage:
    return PromptImage(b"x", "image/png", "d" * 64, w, h, "pic.png")


def test_count_limits_of_a_message_and_of_a_session() -> None:
    check_prompt_images([_img()] * MAX_IMAGES_PER_MESSAGE)
    with pytest.raises(ImageRefused, match="21 images is more than the 20 a message may carry"):
        check_prompt_images([_img()] * 21)
    with pytest.raises(ImageRefused, match="would hold 101 images, more than the 100"):
        check_prompt_images([_img()] * 5, [(10, 10)] * 96)
    check_prompt_images([_img()] * 5, [(10, 10)] * 95)
    # more than 20 in the requests: each side at most 2000 px, the new image's and the earlier ones'
    with pytest.raises(ImageRefused, match=r"pic\.png was not attached: with more than 20 images"):
        check_prompt_images([_img(2001, 5)], [(10, 10)] * 20)
    with pytest.raises(ImageRefused, match="an earlier image of the session"):
        check_prompt_images([_img()], [(3000, 10)] + [(10, 10)] * 20)
    check_prompt_images([_img(2001, 5)], [(10, 10)] * 19)


def test_the_block_the_model_gets_and_back() -> None:
    data = webp(12, 7)
    img = read_prompt_image(data)
    block = image_block(img)
    assert block == {"type": "image", "source": {"type": "base64", "media_type": "image/webp",
                                                 "data": base64.b64encode(data).decode()}}
    back = image_of_block(block)
    assert back is not None and (back.sha256, back.width, back.height) == (img.sha256, 12, 7)
    assert image_of_block({"type": "text", "text": "x"}) is None
    assert image_of_block({"type": "image", "source": {"type": "base64", "data": "!!not base64"}}) is None
    msgs = [StoredMessage("s", "user", [block, {"type": "text", "text": "what is this"}])]
    assert history_image_sizes(msgs) == [(12, 7)]


def test_an_image_counts_as_an_image_not_as_its_base64_in_the_token_estimate() -> None:
    block = image_block(read_prompt_image(png(8, 8) + bytes(2_000_000)))
    estimate = estimate_tokens([StoredMessage("s", "user", [block])])
    assert 1_000 < estimate < 2_000  # ~1,600 tokens, not 2.6 MB of base64 / 4


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.sampled_from([b"", b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF89a",
                                                 b"RIFF\x10\x00\x00\x00WEBP"]))
def test_any_bytes_give_an_image_or_a_refusal_never_a_traceback(tail: bytes, head: bytes) -> None:
    try:
        img = read_prompt_image(head + tail)
    except ImageRefused as e:
        assert "was not attached" in str(e)
    else:
        assert img.media_type in ("image/png", "image/jpeg", "image/gif", "image/webp")
        assert 0 < img.width <= 8000 and 0 < img.height <= 8000


def test_after_a_compaction_only_the_images_still_sent_count() -> None:
    from desktop_app.core._compaction import COMPACTION_KEY

    old = [StoredMessage("s", "user", [image_block(read_prompt_image(png(3, 3 + k)))], id=k + 1) for k in range(3)]
    kept = StoredMessage("s", "user", [image_block(read_prompt_image(png(5, 5))), {"type": "text", "text": "x"}], id=4)
    summary = StoredMessage("s", "user", [{"type": "text", "text": "summary",
                                           COMPACTION_KEY: {"summarised": 3, "kept_from": 4}}], id=5)
    assert history_image_sizes([*old, kept]) == [(3, 3), (3, 4), (3, 5), (5, 5)]
    assert history_image_sizes([*old, kept, summary]) == [(5, 5)]  # the summary replaced the first three
