#!/usr/bin/env python3
"""`oal serve`'s chat page (GET /) in headless Chromium (Debian's chromium and
chromium-driver, driven by the venv's selenium).

Starts `oal serve` on stories260K (the real llama2.c checkpoint of ../shared/data) with an
API key, and in the browser: loads the page, enters the key and temperature 0, sends a
message, waits for the streamed answer and reads it from the DOM. It must equal the
answer the OpenAI client gets for the same chat (greedy). A second message continues the
conversation: the page sends the conversation_id it was given and the server reports
cached tokens from the saved states. A wrong key shows the server's error in the page.
A screenshot is written to $OAL_SCREENSHOT (default: the temporary directory).
Exit 0 on success, 77 (ctest: skipped) when Chromium, its driver, selenium or the data
is missing and OAL_REQUIRE_SHARED is not set.
"""
import os
import pathlib
import shutil
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
VENV_PY = HERE.parents[1] / ".cache" / "venv" / "bin" / "python"
# Run under the venv's interpreter, where selenium and openai are (before the import
# below, whose own re-exec would start the other test).
if VENV_PY.exists() and pathlib.Path(sys.prefix).resolve() != VENV_PY.parents[1].resolve():
    os.execv(str(VENV_PY), [str(VENV_PY), __file__] + sys.argv[1:])
sys.path.insert(0, str(HERE))
import openai_client_test as common  # server start/stop, the skip rule, the API key

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    common.skip("selenium is not installed (run scripts/python-venv.sh)")

CHROMIUM = shutil.which("chromium")
DRIVER = shutil.which("chromedriver")
if not CHROMIUM or not DRIVER:
    common.skip("chromium or chromium-driver is missing (scripts/install-deps.sh --test)")


def browser():
    opts = Options()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=900,700"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service(DRIVER), options=opts)


def assistant_texts(d):
    return [e.text for e in d.find_elements(By.CSS_SELECTOR, ".msg.assistant")]


def send(d, text, answers_before):
    """Types `text`, sends it with Enter and waits until its answer has streamed."""
    d.find_element(By.ID, "input").send_keys(text + "\n")
    WebDriverWait(d, 120).until(
        lambda d: len(assistant_texts(d)) == answers_before + 1
        and d.find_element(By.TAG_NAME, "body").get_attribute("data-state") == "idle")
    return assistant_texts(d)[-1]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = common.start_server(tmp)
        d = browser()
        try:
            d.get(f"http://127.0.0.1:{port}/")
            assert d.title == "oal serve", d.title
            key, temp = d.find_element(By.ID, "key"), d.find_element(By.ID, "temperature")
            max_tokens = d.find_element(By.ID, "max_tokens")
            # The settings sit in a closed <details>: open it to type into them.
            d.find_element(By.TAG_NAME, "summary").click()
            key.send_keys("wrong")
            temp.clear()
            temp.send_keys("0")
            max_tokens.clear()  # two turns of 64 stay within stories260K's 512 positions
            max_tokens.send_keys("64")
            err = send(d, "Lily went to the park.", 0)
            assert err.startswith("Error: invalid or missing API key"), err

            key.clear()
            key.send_keys(common.API_KEY)
            d.find_element(By.ID, "clear").click()  # also leaves the key field: it is read
            WebDriverWait(d, 10).until(lambda d: d.find_element(By.ID, "model").text == "stories")
            first = send(d, "Lily went to the park.", 0)
            client = common.openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1",
                                          api_key=common.API_KEY, max_retries=0)
            ref = client.chat.completions.create(
                model="stories", messages=[{"role": "user", "content": "Lily went to the park."}],
                max_tokens=64, temperature=0)
            # The DOM's visible text drops leading and trailing white space.
            assert first.strip() == ref.choices[0].message.content.strip(), (first, ref)

            second = send(d, "She saw a dog.", 1)
            assert second and not second.startswith("Error"), second
            stats = d.find_element(By.ID, "stats").text
            cached = int(stats.split("(")[1].split()[0])
            assert cached > 0, f"the second turn reused no saved tokens: {stats}"
            shot = pathlib.Path(os.environ.get("OAL_SCREENSHOT", pathlib.Path(tmp) / "chat.png"))
            d.save_screenshot(str(shot))
            assert shot.stat().st_size > 1000, shot
            print(f"chat page: answers {first[:40]!r}..., {second[:40]!r}...; {stats}; "
                  f"screenshot {shot}")
        finally:
            d.quit()
            common.stop_server(proc, tmp)
    print("OK")


if __name__ == "__main__":
    main()
