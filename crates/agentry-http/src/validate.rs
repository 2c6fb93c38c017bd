//! Request validation for custom routes: `Valid<T>` deserializes the JSON body and runs the
//! type's own checks, answering 400 failure envelopes that say what is wrong.

use std::ops::Deref;

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use futures::future::LocalBoxFuture;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// The checks a request body must pass beyond its shape.
pub trait Validate {
    /// `Err` carries the message, e.g. `quantity must be at least 1`.
    fn validate(&self) -> Result<(), String>;
}

/// A JSON body of type `T` that passed [`Validate::validate`].
#[derive(Debug, Clone)]
pub struct Valid<T>(pub T);

impl<T> Valid<T> {
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> Deref for Valid<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: DeserializeOwned + Validate + 'static> FromRequest for Valid<T> {
    type Error = actix_web::Error;
    type Future = LocalBoxFuture<'static, Result<Self, actix_web::Error>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let json = web::Json::<T>::from_request(req, payload);
        Box::pin(async move {
            let body = json.await?.into_inner();
            body.validate()
                .map_err(|m| ApiError::bad_request(format!("Validation failed: {m}")))?;
            Ok(Valid(body))
        })
    }
}
