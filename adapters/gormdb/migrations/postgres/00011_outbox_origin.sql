-- The traced span of the request that wrote a message (a W3C traceparent, 55 characters), so
-- its delivery's trace links back to the payment. NULL when tracing was off, and for the
-- messages written before: adding a nullable column rewrites no row.

-- +goose Up
ALTER TABLE outbox ADD COLUMN origin varchar(55);

-- +goose Down
ALTER TABLE outbox DROP COLUMN origin;
