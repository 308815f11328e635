"""One module per tab: ``layout(page, ...)`` builds its components, ``declare(page)`` says what a new translation or model changes in it, ``wire(page, ...)`` connects its events."""
