-- A cart names the batches of adds last committed to it, newest first, up to 16
-- (ports.RecentCartAdds), separated by commas: the add transaction puts its batch's fresh id in
-- front, in the statement that creates or locks the cart, so a batch whose COMMIT's answer was
-- lost finds whether it committed (CartRepository.AddCommitted) also when batches of other
-- instances committed on the cart after it, fifteen at most. It replaces last_add_id (00016),
-- which named the last batch only. NULL until the cart's first add after this migration. Ids
-- are UUIDs, ASCII: a binary string compares them byte by byte, and 16 of 36 bytes with 15
-- commas take 591 bytes, kept in the row. A nullable column added last and a column dropped are
-- instant changes on MariaDB and MySQL 8.0.29 and later.

-- +goose Up
ALTER TABLE carts ADD COLUMN recent_add_ids varbinary(591) NULL;
ALTER TABLE carts DROP COLUMN last_add_id;

-- +goose Down
ALTER TABLE carts ADD COLUMN last_add_id varchar(36) COLLATE utf8mb4_bin NULL;
UPDATE carts SET last_add_id = SUBSTRING_INDEX(recent_add_ids, ',', 1);
ALTER TABLE carts DROP COLUMN recent_add_ids;
