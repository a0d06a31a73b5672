package http

import (
	"io"
	stdhttp "net/http"

	"github.com/gin-gonic/gin"

	"github.com/rushgate/rushgate/adapters/localblob"
	"github.com/rushgate/rushgate/application/verification"
	"github.com/rushgate/rushgate/domain"
)

// verificationHandlers serves the challenge verification routes and, on the
// embedded default, the signed upload route.
type verificationHandlers struct {
	service *verification.Service
	uploads *localblob.Store // nil when uploads go to S3
}

type createChallengeRequest struct {
	Title    string  `json:"title"`
	Deadline string  `json:"deadline"`
	CrewID   *string `json:"crewId"`
}

// createChallenge answers POST /admin/challenges (admin).
func (h verificationHandlers) createChallenge(c *gin.Context) {
	var req createChallengeRequest
	if err := decodeJSON(c.Request, &req, false); err != nil {
		respondError(c, err)
		return
	}
	deadline, err := domain.ParseInstant("deadline", req.Deadline)
	if err != nil {
		respondError(c, err)
		return
	}
	cmd := verification.CreateChallengeCommand{Title: req.Title, Deadline: deadline}
	if req.CrewID != nil {
		if *req.CrewID == "" {
			respondError(c, domain.Invalid("crewId", "must be a UUID"))
			return
		}
		cmd.CrewID = *req.CrewID
	}
	view, err := h.service.CreateChallenge(c.Request.Context(), cmd)
	if err != nil {
		respondError(c, err)
		return
	}
	c.Header("Location", "/challenges/"+view.ID)
	writeJSON(c, stdhttp.StatusCreated, wireChallenge(view))
}

// getChallenge answers GET /challenges/{challengeId}.
func (h verificationHandlers) getChallenge(c *gin.Context) {
	view, err := h.service.GetChallenge(c.Request.Context(), c.Param("challengeId"))
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusOK, wireChallenge(view))
}

// listVerifications answers GET /challenges/{challengeId}/verifications?limit=&cursor=: the
// caller's own, or everyone's for an admin.
func (h verificationHandlers) listVerifications(c *gin.Context) {
	query, err := pageQuery(c)
	if err != nil {
		respondError(c, err)
		return
	}
	p := principal(c)
	page, err := h.service.ListVerifications(c.Request.Context(), verification.ListCommand{
		ChallengeID: c.Param("challengeId"), UserID: p.UserID, Admin: p.Role == RoleAdmin,
		Limit: query.limit, Cursor: query.cursor,
	})
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusOK, wireVerificationPage(page))
}

type createSessionRequest struct {
	FileName    string `json:"fileName"`
	ContentType string `json:"contentType"`
	FileSize    *int64 `json:"fileSize"` // nil: missing, which is VALIDATION_FAILED, not UNSUPPORTED_FILE
}

// createSession answers POST /upload-sessions with where and how to upload the file.
func (h verificationHandlers) createSession(c *gin.Context) {
	var req createSessionRequest
	if err := decodeJSON(c.Request, &req, false); err != nil {
		respondError(c, err)
		return
	}
	if req.FileSize == nil {
		respondError(c, domain.Invalid("fileSize", "is required"))
		return
	}
	view, err := h.service.CreateUploadSession(c.Request.Context(), verification.SessionCommand{
		UserID: principal(c).UserID, FileName: req.FileName, ContentType: req.ContentType, FileSize: *req.FileSize,
	})
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusOK, wireUploadSession(view))
}

type verifyRequest struct {
	SessionID   string `json:"sessionId"`
	ChallengeID string `json:"challengeId"`
	ImageKey    string `json:"imageKey"`
}

// verify answers POST /verifications, guarded by the Idempotency-Key header.
func (h verificationHandlers) verify(c *gin.Context) {
	var req verifyRequest
	if err := decodeJSON(c.Request, &req, false); err != nil {
		respondError(c, err)
		return
	}
	res, err := h.service.Verify(c.Request.Context(), verification.VerifyCommand{
		UserID: principal(c).UserID, SessionID: req.SessionID, ChallengeID: req.ChallengeID, ImageKey: req.ImageKey,
		IdempotencyKey: c.GetHeader(IdempotencyKeyHeader),
	})
	respondGuarded(c, res, err, wireVerification)
}

// upload answers PUT /uploads/{key}, the embedded default's signed upload: the URL's signature
// is the authorisation, checked with everything else by localblob.Store.Receive. A good upload
// answers 200 with an empty body, as S3 does.
func (h verificationHandlers) upload(c *gin.Context) {
	if h.uploads == nil {
		respondError(c, errRouteNotFound)
		return
	}
	body := &readErrorRecorder{r: c.Request.Body}
	err := h.uploads.Receive(localblob.Upload{
		Key:           c.Param("key"),
		ContentType:   c.GetHeader("Content-Type"),
		ContentLength: c.Request.ContentLength,
		Expires:       c.Query("expires"),
		Signature:     c.Query("signature"),
		Body:          body,
	})
	if body.err != nil {
		respondError(c, bodyReadError(body.err))
		return
	}
	if err != nil {
		respondError(c, err)
		return
	}
	c.Status(stdhttp.StatusOK)
}

// readErrorRecorder remembers the error reading a request body failed with, other than its end.
type readErrorRecorder struct {
	r   io.Reader
	err error
}

func (r *readErrorRecorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}

// VerificationRoutes serves the challenges and their verifications; uploads is nil when uploads
// go to S3, and the local upload route then answers 404.
func VerificationRoutes(service *verification.Service, uploads *localblob.Store) Routes {
	h := verificationHandlers{service: service, uploads: uploads}
	return func(g Groups) {
		// The signed URL authorises an upload, and bounds its body to the signed length.
		g.Public.PUT(localblob.RoutePrefix+":key", h.upload)
		g.Query.Take(stdhttp.MethodPut, localblob.RoutePrefix+":key", "expires", "signature")
		g.API.POST("/admin/challenges", requireRole(RoleAdmin), h.createChallenge)
		g.API.GET("/challenges/:challengeId", h.getChallenge)
		g.API.GET("/challenges/:challengeId/verifications", h.listVerifications)
		g.Query.Take(stdhttp.MethodGet, "/challenges/:challengeId/verifications", pageParameters...)
		g.API.POST("/upload-sessions", h.createSession)
		g.API.POST("/verifications", h.verify)
	}
}
