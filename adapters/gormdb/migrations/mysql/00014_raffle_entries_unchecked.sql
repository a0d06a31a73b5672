-- An entry's raffle is checked by the statement that stores it: the INSERT … SELECT joins its
-- users to the raffle's row, read in share mode while OPEN, so every stored entry names a raffle
-- that exists, and raffles are never deleted. The foreign key checked that row again for each
-- entry. The primary key's index (raffle_id first) still serves the entries of a raffle.

-- +goose Up
ALTER TABLE raffle_entries DROP FOREIGN KEY raffle_entries_raffle;

-- +goose Down
ALTER TABLE raffle_entries
    ADD CONSTRAINT raffle_entries_raffle FOREIGN KEY (raffle_id) REFERENCES raffles (id) ON DELETE CASCADE;
