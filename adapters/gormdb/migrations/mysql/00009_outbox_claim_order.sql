-- The relay's claim reads due PENDING rows oldest first (SPEC §4). Through outbox_due InnoDB had
-- to lock every due row to sort them, so one relay's claim of 100 held them all and a second
-- relay found nothing to take; its lease, moving next_attempt_at within that index, crossed
-- other relays' outcome updates into deadlocks. In this index's order the claim stops at the
-- rows it takes, checking next_attempt_at on those it passes, and its lease changes no index.
-- Passing costs a backlog: behind 200,000 rows waiting for a retry a claim took 0.2 s here.

-- +goose Up
CREATE INDEX outbox_claim ON outbox (status, created_at, id);
DROP INDEX outbox_due ON outbox;

-- +goose Down
CREATE INDEX outbox_due ON outbox (status, next_attempt_at, created_at);
DROP INDEX outbox_claim ON outbox;
