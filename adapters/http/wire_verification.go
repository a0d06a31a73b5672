package http

import (
	"time"

	"github.com/rushgate/rushgate/application/verification"
)

type challengeJSON struct {
	ID        string    `json:"id"`
	CrewID    *string   `json:"crewId"`
	Title     string    `json:"title"`
	Deadline  time.Time `json:"deadline"`
	CreatedAt time.Time `json:"createdAt"`
}

func wireChallenge(v verification.ChallengeView) challengeJSON { return challengeJSON(v) }

type uploadSessionJSON struct {
	SessionID       string            `json:"sessionId"`
	PresignedURL    string            `json:"presignedUrl"`
	ExpiresIn       int               `json:"expiresIn"` // seconds
	ObjectKey       string            `json:"objectKey"`
	RequiredHeaders map[string]string `json:"requiredHeaders"`
}

func wireUploadSession(v verification.SessionView) uploadSessionJSON { return uploadSessionJSON(v) }

type verificationJSON struct {
	ID              string    `json:"id"`
	UserID          string    `json:"userId"`
	ChallengeID     string    `json:"challengeId"`
	UploadSessionID string    `json:"uploadSessionId"`
	ImageKey        string    `json:"imageKey"`
	Status          string    `json:"status"`
	RequestedAt     time.Time `json:"requestedAt"`
}

func wireVerification(v verification.View) verificationJSON { return verificationJSON(v) }

func wireVerificationPage(p verification.VerificationPage) pageJSON[verificationJSON] {
	return wirePage(p.Items, p.NextCursor, wireVerification)
}
