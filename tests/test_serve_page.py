"""The chat page of `tffedu serve` in headless Chromium: type a message, see the answer stream in,
equal to what the API answers for the same conversation; a second turn carries the first; a
screenshot is taken of the page. Needs Chromium and ChromeDriver (skipped where missing)."""
import pytest

from browser_util import chromium
from tffedu.assets import default_model_path
from tffedu.engine import load

pytestmark = pytest.mark.slow
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")


@pytest.fixture(scope="module")
def server():
    from tffedu.serve import ServerThread, make_app
    with ServerThread(make_app(load(default_model_path(quiet=True)), max_batch=4)) as s:
        yield s


@pytest.fixture(scope="module")
def browser():
    yield from chromium("1100,800")


def api_answer(server, messages, n):
    r = httpx.post(server.url + "/v1/chat/completions", timeout=120,
                   json={"messages": messages, "max_tokens": n, "temperature": 0,
                         "chat_template_kwargs": {"enable_thinking": True}})
    return r.json()["choices"][0]["message"]["content"]


def say(browser, text, turn):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    box = browser.find_element(By.ID, "message")
    box.send_keys(text)
    browser.find_element(By.ID, "send").click()
    WebDriverWait(browser, 120).until(
        lambda d: len(d.find_elements(By.CSS_SELECTOR, ".msg.assistant.done, .msg.error")) >= turn)
    return browser.find_elements(By.CSS_SELECTOR, ".msg.assistant.done, .msg.error")[-1]


def test_chat_page_streams_the_answer_the_api_gives(server, browser, tmp_path):
    browser.get(server.url + "/")
    browser.execute_script("document.getElementById('temperature').value = '0';"
                           "document.getElementById('max_tokens').value = '12';")
    first = say(browser, "What is the capital of France?", 1)
    assert "error" not in first.get_attribute("class"), first.text
    q1 = [{"role": "user", "content": "What is the capital of France?"}]
    a1 = api_answer(server, q1, 12)
    assert first.get_attribute("data-text") == a1 and a1
    assert "tokens/s" in browser.find_element("id", "stats").text
    second = say(browser, "And of Italy?", 2)            # the page sends the whole conversation
    q2 = q1 + [{"role": "assistant", "content": a1}, {"role": "user", "content": "And of Italy?"}]
    assert second.get_attribute("data-text") == api_answer(server, q2, 12)
    shot = tmp_path / "chat.png"
    assert browser.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 5000
