package http

import (
	"time"

	appwaiting "github.com/rushgate/rushgate/application/waiting"
)

type eventJSON struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Seats     int        `json:"seats"`
	Slots     int        `json:"slots"`
	Mode      string     `json:"mode"`
	TokenTTL  string     `json:"tokenTtl"`
	CreatedAt time.Time  `json:"createdAt"`
	OpensAt   *time.Time `json:"opensAt,omitempty"`
	Prequeue  string     `json:"prequeue,omitempty"`
	SeedHash  string     `json:"seedHash,omitempty"`
}

func wireEvent(v appwaiting.EventView) eventJSON { return eventJSON(v) }

// publicEventJSON answers GET /events/{eventId}.
type publicEventJSON struct {
	ID       string     `json:"id"`
	Name     string     `json:"name"`
	Mode     string     `json:"mode"`
	Seats    int        `json:"seats"`
	Slots    int        `json:"slots"`
	OpensAt  *time.Time `json:"opensAt,omitempty"`
	Prequeue string     `json:"prequeue,omitempty"`
	SeedHash string     `json:"seedHash,omitempty"`
	Seed     string     `json:"seed,omitempty"`
	SoldOut  bool       `json:"soldOut"`
}

func wirePublicEvent(v appwaiting.PublicEventView) publicEventJSON { return publicEventJSON(v) }

type queueStatusJSON struct {
	Status                 string `json:"status"`
	Rank                   int    `json:"rank"`
	AheadCount             int    `json:"aheadCount"`
	RefreshIntervalSeconds int    `json:"refreshIntervalSeconds"`
	EstimatedWaitSeconds   *int   `json:"estimatedWaitSeconds"`
}

// prequeueStatusJSON answers entering and polling while the user is in a pre-queue: no rank
// exists yet.
type prequeueStatusJSON struct {
	Status                 string    `json:"status"`
	Rank                   *int      `json:"rank"`
	AheadCount             *int      `json:"aheadCount"`
	OpensAt                time.Time `json:"opensAt"`
	SeedHash               string    `json:"seedHash"`
	RefreshIntervalSeconds int       `json:"refreshIntervalSeconds"`
	EstimatedWaitSeconds   *int      `json:"estimatedWaitSeconds"`
}

func wireQueueStatus(v appwaiting.StatusView) any {
	if p := v.Prequeue; p != nil {
		return prequeueStatusJSON{Status: v.Status, OpensAt: p.OpensAt, SeedHash: p.SeedHash,
			RefreshIntervalSeconds: v.RefreshIntervalSeconds}
	}
	return queueStatusJSON{Status: v.Status, Rank: v.Rank, AheadCount: v.AheadCount,
		RefreshIntervalSeconds: v.RefreshIntervalSeconds, EstimatedWaitSeconds: v.EstimatedWaitSeconds}
}

// prequeueJSON is the data of a push `prequeue` event.
type prequeueJSON struct {
	OpensAt  time.Time `json:"opensAt"`
	SeedHash string    `json:"seedHash"`
}

func wirePrequeue(v appwaiting.PrequeueView) prequeueJSON { return prequeueJSON(v) }

// soldOutJSON answers a status poll of a sold-out event: the status alone.
type soldOutJSON struct {
	Status string `json:"status"`
}

// entryTokenJSON answers a claim and is the data of a push `admitted` event.
type entryTokenJSON struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expiresAt"`
}

func wireEntryToken(v appwaiting.TokenView) entryTokenJSON { return entryTokenJSON(v) }

type queueJSON struct {
	Waiting           int              `json:"waiting"`
	Prequeued         int              `json:"prequeued"`
	Admitted          int              `json:"admitted"`
	Slots             int              `json:"slots"`
	RemainingSlots    int              `json:"remainingSlots"`
	RemainingSeats    int              `json:"remainingSeats"`
	Claims            int64            `json:"claims"`
	ExpiredReconciled int64            `json:"expiredReconciled"`
	DroppedIdle       int64            `json:"droppedIdle"`
	Returned          int64            `json:"returned"`
	AdmissionRate     *float64         `json:"admissionRate"`
	WaitAccuracy      waitAccuracyJSON `json:"waitAccuracy"`
	Connections       int              `json:"connections"`
	SoldOut           bool             `json:"soldOut"`
}

// waitAccuracyJSON is the queue view's wait accuracy: null errors while there is no sample.
type waitAccuracyJSON struct {
	Samples            int      `json:"samples"`
	MedianErrorSeconds *float64 `json:"medianErrorSeconds"`
	P90ErrorSeconds    *float64 `json:"p90ErrorSeconds"`
}

func wireQueue(v appwaiting.QueueView) queueJSON {
	a := waitAccuracyJSON{Samples: v.WaitAccuracy.Samples}
	if a.Samples > 0 {
		a.MedianErrorSeconds, a.P90ErrorSeconds = &v.WaitAccuracy.MedianErrorSeconds, &v.WaitAccuracy.P90ErrorSeconds
	}
	return queueJSON{Waiting: v.Waiting, Prequeued: v.Prequeued, Admitted: v.Admitted, Slots: v.Slots, RemainingSlots: v.RemainingSlots,
		RemainingSeats: v.RemainingSeats, Claims: v.Claims, ExpiredReconciled: v.ExpiredReconciled, DroppedIdle: v.DroppedIdle,
		Returned: v.Returned, AdmissionRate: v.AdmissionRate, WaitAccuracy: a, Connections: v.Connections, SoldOut: v.SoldOut}
}

type seatJSON struct {
	ID       string `json:"id"`
	Reserved bool   `json:"reserved"`
}

func wireSeat(v appwaiting.SeatView) seatJSON { return seatJSON(v) }

func wireSeatPage(p appwaiting.SeatPage) pageJSON[seatJSON] {
	return wirePage(p.Items, p.NextCursor, wireSeat)
}

type reservationJSON struct {
	ID         string    `json:"id"`
	EventID    string    `json:"eventId"`
	SeatID     string    `json:"seatId"`
	UserID     string    `json:"userId"`
	ReservedAt time.Time `json:"reservedAt"`
}

func wireReservation(v appwaiting.ReservationView) reservationJSON { return reservationJSON(v) }

// positionJSON is the data of a push `position` event.
type positionJSON struct {
	Rank                 int  `json:"rank"`
	AheadCount           int  `json:"aheadCount"`
	QueueSize            int  `json:"queueSize"`
	EstimatedWaitSeconds *int `json:"estimatedWaitSeconds"`
}

func wirePosition(v appwaiting.PositionView) positionJSON { return positionJSON(v) }
