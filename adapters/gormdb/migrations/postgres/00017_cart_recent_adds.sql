-- A cart names the batches of adds last committed to it, newest first, up to 16
-- (ports.RecentCartAdds): the add transaction puts its batch's fresh id in front, in the
-- statement that creates or locks the cart, so a batch whose COMMIT's answer was lost finds
-- whether it committed (CartRepository.AddCommitted) also when batches of other instances
-- committed on the cart after it, fifteen at most. It replaces last_add_id (00016), which named
-- the last batch only. NULL until the cart's first add after this migration. Sixteen ids of 36
-- characters keep the row under 700 bytes, well below the 2 kB from which Postgres moves values
-- out of line. Adding a nullable column without a default and dropping one change only the
-- catalog.

-- +goose Up
ALTER TABLE carts ADD COLUMN recent_add_ids varchar(36)[] COLLATE "C";
ALTER TABLE carts DROP COLUMN last_add_id;

-- +goose Down
ALTER TABLE carts ADD COLUMN last_add_id varchar(36) COLLATE "C";
UPDATE carts SET last_add_id = recent_add_ids[1];
ALTER TABLE carts DROP COLUMN recent_add_ids;
