-- Events, their numbered seats and the reservations of those seats (SPEC §3). Ids use a binary
-- collation so keys compare byte-wise, as on Postgres and in memory.

-- +goose Up
CREATE TABLE events (
    id           varchar(36) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    name         varchar(200) NOT NULL,
    seats        int NOT NULL,
    slots        int NOT NULL,
    mode         varchar(8) NOT NULL,
    token_ttl_ms bigint NOT NULL,
    created_at   datetime(6) NOT NULL,
    CONSTRAINT events_valid CHECK (seats >= 1 AND slots >= 1 AND mode IN ('push', 'pull') AND token_ttl_ms > 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE seats (
    event_id varchar(36) COLLATE utf8mb4_bin NOT NULL,
    seat_no  int NOT NULL,
    reserved boolean NOT NULL DEFAULT false,
    PRIMARY KEY (event_id, seat_no),
    CONSTRAINT seats_event FOREIGN KEY (event_id) REFERENCES events (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- One reservation per seat: the UNIQUE key is the last defence against a double booking.
CREATE TABLE reservations (
    id          varchar(36) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    event_id    varchar(36) COLLATE utf8mb4_bin NOT NULL,
    seat_no     int NOT NULL,
    user_id     varchar(64) COLLATE utf8mb4_bin NOT NULL,
    reserved_at datetime(6) NOT NULL,
    UNIQUE KEY reservations_one_per_seat (event_id, seat_no),
    CONSTRAINT reservations_seat FOREIGN KEY (event_id, seat_no) REFERENCES seats (event_id, seat_no) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE reservations;
DROP TABLE seats;
DROP TABLE events;
