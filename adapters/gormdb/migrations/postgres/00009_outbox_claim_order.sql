-- The relay's claim reads due PENDING rows oldest first (SPEC §4). An index in that order lets
-- it stop at the rows it takes instead of sorting every due row on each claim; the claim checks
-- next_attempt_at on the rows it passes. Built CONCURRENTLY (outside a transaction), so paid
-- orders keep writing their outbox rows while it builds over a table that keeps its SENT rows.
-- A concurrent build that fails leaves an invalid index behind, so each index is dropped before
-- it is built: a rerun builds it again rather than keeping the invalid one and dropping the old.

-- +goose NO TRANSACTION
-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS outbox_claim;
CREATE INDEX CONCURRENTLY outbox_claim ON outbox (created_at, id) WHERE status = 'PENDING';
DROP INDEX CONCURRENTLY IF EXISTS outbox_due;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS outbox_due;
CREATE INDEX CONCURRENTLY outbox_due ON outbox (status, next_attempt_at, created_at);
DROP INDEX CONCURRENTLY IF EXISTS outbox_claim;
