"""A class in Chromium: the teacher opens it on the projector's page, three phones (390 px) join by its link and
answer, the teacher sees three answers, and Reveal reaches every phone with the map that shows why (how soon:
benchmarks/class_load.py)."""

import re

PHONE = {"width": 390, "height": 844}


def test_three_phones_join_by_link_answer_and_see_the_reveal(app_url, browser):
    url, _ = app_url
    teacher = browser.new_page(viewport={"width": 1366, "height": 900})
    teacher.goto(url)
    teacher.wait_for_selector("#attention-plot .js-plotly-plot", timeout=60_000)
    teacher.locator("#lessons").get_by_text("Lessons for a class").click()
    teacher.locator("#class-panel").get_by_text("Run a class").click()
    teacher.locator("#class-open").click()
    link = teacher.locator("#class-join a")
    link.wait_for(timeout=60_000)
    address = link.get_attribute("href")
    assert re.fullmatch(re.escape(url.rstrip("/")) + r"/class/\?code=[A-Z2-9]{5}", address), address
    assert teacher.locator("#class-join svg").count() == 1, "the QR code, drawn on the server"

    phones = []
    for number in range(3):
        phone = browser.new_page(viewport=PHONE)
        phone.goto(address)
        phone.locator("#student-choice input[type=radio]").first.wait_for(state="visible", timeout=60_000)
        phone.wait_for_function("() => !document.querySelector('#student-choice input').disabled", timeout=30_000)
        assert phone.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"], "no sideways scroll"
        phone.locator("#student-choice label").nth(number % 2).click()
        phone.locator("#student-send").click()
        phone.get_by_text("Your answer is in.").wait_for(timeout=30_000)
        phones.append(phone)

    teacher.get_by_text("3 answers").wait_for(timeout=10_000)
    teacher.locator("#class-reveal").click()
    for phone in phones:
        phone.get_by_text("The model's answer:").wait_for(timeout=30_000)
        why = phone.locator("#student-why table")
        assert why.is_visible() and why.locator("tr.marked-row").count() == 1, "the map, its row outlined"
        assert phone.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"], "no sideways scroll"
    for page in (teacher, *phones):
        page.close()


def test_a_german_phone_gets_the_class_in_german_and_its_switch_to_french_is_remembered(app_url, browser):
    from gradio_client import Client

    from ui.runtime.language import table

    url, _ = app_url
    code = Client(url, verbose=False).predict("where_each_word_looks", api_name="/class_open")["code"]
    context = browser.new_context(locale="de-DE", viewport=PHONE)
    phone = context.new_page()
    phone.goto(f"{url}class/?code={code}")
    phone.locator("#student-choice input[type=radio]").first.wait_for(state="visible", timeout=60_000)
    assert phone.url.endswith(f"/class/de/?code={code}") and phone.evaluate("document.documentElement.lang") == "de"
    assert phone.title() == table("de")["class.title"]
    phone.get_by_text("Auf welches englische Wort achtet Kopf").wait_for(timeout=30_000)
    seen = phone.evaluate("document.body.innerText")
    english_only = [words for key, words in table("en").items()
                    if key.startswith("class.") and "{" not in words and words != table("de")[key]]
    assert not [words for words in english_only if words in seen], "one language on the screen"

    assert phone.locator("#student-status").get_attribute("aria-live") == "polite", "read out as it changes"
    phone.get_by_role("link", name="Français").click()
    phone.get_by_text("Quel mot anglais la tête").wait_for(timeout=60_000)
    assert phone.url.endswith(f"/class/fr/?code={code}") and phone.evaluate("document.documentElement.lang") == "fr"
    phone.goto(f"{url}class/")
    phone.get_by_role("button", name="Rejoindre").wait_for(timeout=60_000)
    assert phone.url.endswith("/class/fr/"), "the choice is remembered over the browser's German"
    context.close()
