-- An entry's raffle is checked by the statement that stores it: the INSERT … SELECT joins its
-- users to the raffle's row, read in share mode while OPEN, so every stored entry names a raffle
-- that exists, and raffles are never deleted. The foreign key checked that row again for each
-- entry (one trigger query per row), the largest per-entry cost of the entry statement after
-- the row itself.

-- +goose Up
ALTER TABLE raffle_entries DROP CONSTRAINT raffle_entries_raffle_id_fkey;

-- +goose Down
ALTER TABLE raffle_entries
    ADD CONSTRAINT raffle_entries_raffle_id_fkey FOREIGN KEY (raffle_id) REFERENCES raffles (id) ON DELETE CASCADE;
