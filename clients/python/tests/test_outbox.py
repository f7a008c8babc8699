"""The transactional outbox's rejects, against a live rowq server.

The server's test (cmd/rowq TestPythonClient) writes two outbox rows of
category "py-outbox", which routes nowhere, without a URL before these
tests run: both are rejects. Applications write the outbox with their own SQL (docs/outbox.md),
not through the client.
"""

from __future__ import annotations

import unittest
from datetime import datetime

from support import client


class OutboxTest(unittest.TestCase):
    def test_rejects_page_by_page(self) -> None:
        c = client()
        ours = [r for r in c.outbox_rejects(limit=1) if r.category == "py-outbox"]
        self.assertEqual(len(ours), 2, "the two rows the server's test wrote")
        for r in ours:
            # A row without a url is checked once its category is routed,
            # since a pull queue's jobs need none; py-outbox routes nowhere.
            self.assertTrue(r.reason.startswith('category: no routing for category "py-outbox"'), r.reason)
            self.assertIsNone(r.url)
            self.assertEqual(r.payload, '{"n": 1}')
            self.assertIsNone(r.unique_key)
            self.assertIsInstance(r.created_at, datetime)
            self.assertIsInstance(r.rejected_at, datetime)
        self.assertLess(ours[0].id, ours[1].id)
        self.assertLess(ours[0].outbox_id, ours[1].outbox_id)


if __name__ == "__main__":
    unittest.main()
