package http

import (
	stdhttp "net/http"

	"github.com/gin-gonic/gin"

	appcatalog "github.com/rushgate/rushgate/application/catalog"
	"github.com/rushgate/rushgate/domain"
)

// productHandlers serves the product routes.
type productHandlers struct {
	products *appcatalog.Service
}

// createProductRequest is the body of POST /admin/products. Price and stock are pointers so a
// missing one is told apart from zero, which is valid.
type createProductRequest struct {
	Name  string `json:"name"`
	Price *int64 `json:"price"`
	Stock *int64 `json:"stock"`
}

// create answers POST /admin/products (admin).
func (h productHandlers) create(c *gin.Context) {
	var req createProductRequest
	if err := decodeJSON(c.Request, &req, false); err != nil {
		respondError(c, err)
		return
	}
	if req.Price == nil {
		respondError(c, domain.Invalid("price", "is required"))
		return
	}
	if req.Stock == nil {
		respondError(c, domain.Invalid("stock", "is required"))
		return
	}
	view, err := h.products.Create(c.Request.Context(), appcatalog.CreateCommand{Name: req.Name, Price: *req.Price, Stock: *req.Stock})
	if err != nil {
		respondError(c, err)
		return
	}
	c.Header("Location", "/api/products/"+view.ID)
	writeJSON(c, stdhttp.StatusCreated, wireProduct(view))
}

// get answers GET /api/products/{productId}.
func (h productHandlers) get(c *gin.Context) {
	view, err := h.products.Get(c.Request.Context(), c.Param("productId"))
	if err != nil {
		respondError(c, err)
		return
	}
	writeJSON(c, stdhttp.StatusOK, wireProduct(view))
}

// ProductRoutes serves the catalog.
func ProductRoutes(products *appcatalog.Service) Routes {
	h := productHandlers{products: products}
	return func(g Groups) {
		g.API.POST("/admin/products", requireRole(RoleAdmin), h.create)
		g.API.GET("/api/products/:productId", h.get)
	}
}
