-- An event's pre-queue (SPEC §8): when it opens, how it is placed, and the seed of its draw,
-- stored once at creation so that no restart or second instance changes it; only its hash is
-- shown until the pre-queue is placed. All three are NULL for an event without one.

-- +goose Up
ALTER TABLE events
    ADD COLUMN opens_at datetime(6) NULL,
    ADD COLUMN prequeue varchar(8) NULL,
    ADD COLUMN seed     binary(32) NULL,
    ADD CONSTRAINT events_prequeue CHECK (
        (opens_at IS NULL AND prequeue IS NULL AND seed IS NULL)
        OR (opens_at IS NOT NULL AND prequeue IN ('shuffle', 'fifo') AND seed IS NOT NULL));

-- +goose Down
ALTER TABLE events
    DROP CONSTRAINT events_prequeue,
    DROP COLUMN seed,
    DROP COLUMN prequeue,
    DROP COLUMN opens_at;
