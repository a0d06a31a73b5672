-- An order awaiting payment can be cancelled (SPEC §4): CANCELLED joins the statuses the CHECK
-- allows. A cancelled order has no paid_at, as orders_paid_when_completed already requires.
-- Going down fails while a CANCELLED order exists: the older schema cannot hold one, and turning
-- it back into a payable PENDING order would undo the user's cancel.

-- +goose Up
ALTER TABLE orders DROP CONSTRAINT orders_status,
    ADD CONSTRAINT orders_status CHECK (status IN ('PENDING', 'COMPLETED', 'CANCELLED'));

-- +goose Down
ALTER TABLE orders DROP CONSTRAINT orders_status,
    ADD CONSTRAINT orders_status CHECK (status IN ('PENDING', 'COMPLETED'));
