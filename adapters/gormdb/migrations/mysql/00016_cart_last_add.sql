-- A cart names the last batch of adds committed to it: the add transaction writes the batch's
-- fresh id in the statement that creates or locks the cart, so a batch whose COMMIT's answer was
-- lost reads whether it committed (CartRepository.LastAddID). NULL until the cart's first add
-- after this migration. A nullable column added last is an instant change on MariaDB and MySQL 8.

-- +goose Up
ALTER TABLE carts ADD COLUMN last_add_id varchar(36) COLLATE utf8mb4_bin NULL;

-- +goose Down
ALTER TABLE carts DROP COLUMN last_add_id;
