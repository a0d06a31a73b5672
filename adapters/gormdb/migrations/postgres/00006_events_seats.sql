-- Events, their numbered seats and the reservations of those seats (SPEC §3). Ids compare
-- byte-wise (COLLATE "C"), as in memory.

-- +goose Up
CREATE TABLE events (
    id           varchar(36) COLLATE "C" PRIMARY KEY,
    name         varchar(200) NOT NULL,
    seats        integer NOT NULL CHECK (seats >= 1),
    slots        integer NOT NULL CHECK (slots >= 1),
    mode         varchar(8) NOT NULL CHECK (mode IN ('push', 'pull')),
    token_ttl_ms bigint NOT NULL CHECK (token_ttl_ms > 0),
    created_at   timestamptz(6) NOT NULL
);

CREATE TABLE seats (
    event_id varchar(36) COLLATE "C" NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    seat_no  integer NOT NULL,
    reserved boolean NOT NULL DEFAULT false,
    PRIMARY KEY (event_id, seat_no)
);

-- One reservation per seat: the UNIQUE key is the last defence against a double booking.
CREATE TABLE reservations (
    id          varchar(36) COLLATE "C" PRIMARY KEY,
    event_id    varchar(36) COLLATE "C" NOT NULL,
    seat_no     integer NOT NULL,
    user_id     varchar(64) COLLATE "C" NOT NULL,
    reserved_at timestamptz(6) NOT NULL,
    CONSTRAINT reservations_one_per_seat UNIQUE (event_id, seat_no),
    CONSTRAINT reservations_seat FOREIGN KEY (event_id, seat_no) REFERENCES seats (event_id, seat_no) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE reservations;
DROP TABLE seats;
DROP TABLE events;
