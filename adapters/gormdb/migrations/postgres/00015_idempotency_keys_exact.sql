-- Idempotency keys compare exactly (SPEC §0): MySQL's migration of this version makes them so.
-- Postgres compares varchar exactly already (trailing spaces included), so nothing changes here;
-- the version keeps the dialects' schema versions in step.

-- +goose Up

-- +goose Down
