//! [`Authorizer`]: one server's authorization, from a `WWW-Authenticate`
//! challenge to tokens in its [`TokenStore`], and the manager rmcp's
//! transport attaches them with.
//!
//! rmcp's `AuthorizationSession` does the same steps but forgets the
//! client secret a registration returned and cannot reuse a stored
//! registration, so the steps are driven one by one here: discover
//! (rmcp), drop what was bound to another issuer (SEP-2352), identify
//! (pre-registered, stored registration, client ID metadata document, or
//! dynamic registration, in that order), build the URL (rmcp: PKCE,
//! `resource`), get the code ([`super::redirect`]), exchange
//! it (rmcp: state and `iss` checks).

use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationMetadata,
    OAuthClientConfig,
};

use super::redirect::{self, Loopback, Probe};
use super::store::{Registration, TokenStore};
use super::{Interaction, OAuthError, OAuthOptions};

/// The redirect URI configured when restoring a client that only
/// refreshes (the token endpoint does not check it).
const RESTORE_REDIRECT: &str = "http://127.0.0.1/callback";

/// Authorizes Satchel with one server, as configured.
#[derive(Debug, Clone)]
pub struct Authorizer {
    /// The MCP server's URL.
    pub url: String,
    /// The name `satchel mcp login` knows it by.
    pub login_name: String,
    /// Who Satchel is.
    pub options: OAuthOptions,
    /// Where the result goes.
    pub store: TokenStore,
    /// Whether a person may be asked.
    pub interaction: Interaction,
    probe: reqwest::Client,
}

impl Authorizer {
    /// An authorizer for `url`; `login_name` is what an error tells the
    /// user to log in to.
    pub fn new(
        url: &str,
        login_name: &str,
        options: OAuthOptions,
        store: TokenStore,
        interaction: Interaction,
    ) -> Result<Authorizer, OAuthError> {
        crate::ensure_crypto_provider();
        let probe = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(AuthError::HttpError)?;
        Ok(Authorizer {
            url: url.to_owned(),
            login_name: login_name.to_owned(),
            options,
            store,
            interaction,
            probe,
        })
    }

    async fn manager(&self) -> Result<AuthorizationManager, OAuthError> {
        crate::ensure_crypto_provider();
        let mut manager = if self.options.allow_private_network {
            AuthorizationManager::new_allowing_private_addresses(self.url.as_str()).await?
        } else {
            AuthorizationManager::new(self.url.as_str()).await?
        };
        manager.set_credential_store(self.store.clone());
        Ok(manager)
    }

    /// A manager for the transport: holding the stored tokens (and able to
    /// refresh them) when there are any, else empty, so the first request
    /// goes out without a token and the server's challenge starts
    /// [`Authorizer::authorize`]. Needs no network.
    pub async fn restore(&self) -> Result<AuthorizationManager, OAuthError> {
        let mut manager = self.manager().await?;
        let record = self.store.record()?;
        let (Some(metadata), Some(credentials)) = (&record.metadata, &record.credentials) else {
            return Ok(manager);
        };
        if credentials.token_response.is_none() {
            return Ok(manager);
        }
        manager.set_metadata(metadata.clone());
        let (client_id, secret, redirect_uri) = match &record.registration {
            Some(r) if r.client_id == credentials.client_id => (
                r.client_id.clone(),
                r.client_secret.clone(),
                r.redirect_uri.clone(),
            ),
            _ => (
                credentials.client_id.clone(),
                self.secret_for(&credentials.client_id),
                RESTORE_REDIRECT.to_owned(),
            ),
        };
        manager.configure_client(client_config(client_id, secret, redirect_uri))?;
        Ok(manager)
    }

    /// The configured secret, when `client_id` is the configured client.
    fn secret_for(&self, client_id: &str) -> Option<String> {
        (self.options.client_id.as_deref() == Some(client_id))
            .then(|| self.options.client_secret.clone())
            .flatten()
    }

    /// Authorizes from `challenge` (a 401's or 403's `WWW-Authenticate`,
    /// or none to discover from the server's URL), asking for `scopes`
    /// (none: the configured scopes, else the challenge's, else the
    /// server's `scopes_supported`). Returns a manager holding the new
    /// tokens, which are stored too.
    pub async fn authorize(
        &self,
        challenge: Option<&str>,
        scopes: Option<Vec<String>>,
    ) -> Result<AuthorizationManager, OAuthError> {
        if matches!(self.interaction, Interaction::Never) {
            return Err(OAuthError::NeedsLogin(self.login_name.clone()));
        }
        let mut manager = self.manager().await?;
        let resolution = manager.resolve_metadata_from_challenge(challenge).await?;
        let metadata = resolution.metadata;
        manager.set_metadata(metadata.clone());

        let mut record = self.store.record()?;
        if record.issuer.is_some() && record.issuer != metadata.issuer {
            tracing::info!(
                server = %self.url,
                "the server's authorization server changed; registering with the new one"
            );
            record.registration = None;
            record.credentials = None;
        }
        record.issuer = metadata.issuer.clone();
        record.metadata = Some(metadata.clone());

        // The stored registration's redirect port when it is free, so the
        // registration stays valid; else a new port and a new registration.
        let stored_port = record
            .registration
            .as_ref()
            .and_then(|r| url::Url::parse(&r.redirect_uri).ok())
            .and_then(|u| u.port());
        let loopback = match stored_port {
            Some(port) => match Loopback::bind(port).await {
                Ok(loopback) => loopback,
                Err(_) => {
                    record.registration = None;
                    Loopback::bind(0).await?
                }
            },
            None => Loopback::bind(0).await?,
        };
        let redirect_uri = loopback.redirect_uri().to_owned();

        let mut scopes = match scopes {
            Some(scopes) => scopes,
            None if !self.options.scopes.is_empty() => self.options.scopes.clone(),
            None => manager.select_initial_scopes(&[]).await,
        };
        add_offline_access(&mut scopes, &metadata);
        let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();

        let registration = self
            .identify(&mut manager, &metadata, &record, &redirect_uri, &scope_refs)
            .await?;
        record.registration = registration;
        self.store.put(record)?;

        let auth_url = manager.get_authorization_url(&scope_refs).await?;
        let callback_url = self.callback(&loopback, &auth_url).await?;
        let callback = AuthorizationCallback::from_redirect_url(&callback_url)?;
        manager
            .exchange_code_for_token_with_issuer(
                &callback.code,
                &callback.csrf_token,
                callback.issuer.as_deref(),
            )
            .await?;
        Ok(manager)
    }

    /// Configures `manager`'s client identity; returns the registration to
    /// keep (a dynamic one, new or reused).
    async fn identify(
        &self,
        manager: &mut AuthorizationManager,
        metadata: &AuthorizationMetadata,
        record: &super::Record,
        redirect_uri: &str,
        scopes: &[&str],
    ) -> Result<Option<Registration>, OAuthError> {
        if let Some(client_id) = &self.options.client_id {
            manager.configure_client(client_config(
                client_id.clone(),
                self.options.client_secret.clone(),
                redirect_uri.to_owned(),
            ))?;
            return Ok(None);
        }
        if let Some(stored) = record
            .registration
            .as_ref()
            .filter(|r| r.redirect_uri == redirect_uri)
        {
            manager.configure_client(client_config(
                stored.client_id.clone(),
                stored.client_secret.clone(),
                stored.redirect_uri.clone(),
            ))?;
            return Ok(Some(stored.clone()));
        }
        let cimd_supported = metadata
            .additional_fields
            .get("client_id_metadata_document_supported")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        if let (Some(document), true) = (&self.options.client_metadata_url, cimd_supported) {
            manager.configure_client(client_config(
                document.clone(),
                None,
                redirect_uri.to_owned(),
            ))?;
            return Ok(None);
        }
        if metadata.registration_endpoint.is_none() {
            return Err(OAuthError::GaveUp(format!(
                "the authorization server of {} offers no way to register Satchel; set `oauth.clientId` (and `clientSecret`) in mcp.json",
                self.url
            )));
        }
        let name = if self.options.client_name.is_empty() {
            "Satchel"
        } else {
            &self.options.client_name
        };
        let config = manager.register_client(name, redirect_uri, scopes).await?;
        Ok(Some(Registration {
            client_id: config.client_id,
            client_secret: config.client_secret,
            redirect_uri: redirect_uri.to_owned(),
        }))
    }

    /// The callback URL: from the headless probe, else from the person.
    async fn callback(&self, loopback: &Loopback, auth_url: &str) -> Result<String, OAuthError> {
        if let Probe::Callback(url) =
            redirect::probe(&self.probe, auth_url, loopback.redirect_uri()).await?
        {
            return Ok(url);
        }
        let Interaction::Browser { show, wait } = &self.interaction else {
            return Err(OAuthError::NeedsLogin(self.login_name.clone()));
        };
        let state = redirect::state_of(auth_url).ok_or_else(|| {
            OAuthError::GaveUp("the authorization URL carries no state".to_owned())
        })?;
        show(auth_url);
        Ok(loopback.wait(&state, *wait).await?)
    }
}

fn client_config(
    client_id: String,
    secret: Option<String>,
    redirect_uri: String,
) -> OAuthClientConfig {
    let config = OAuthClientConfig::new(client_id, redirect_uri);
    match secret {
        Some(secret) => config.with_client_secret(secret),
        None => config,
    }
}

/// SEP-2207: `offline_access` joins a non-empty request when the
/// authorization server lists it, so it issues a refresh token.
fn add_offline_access(scopes: &mut Vec<String>, metadata: &AuthorizationMetadata) {
    let supported = metadata
        .scopes_supported
        .as_ref()
        .is_some_and(|s| s.iter().any(|s| s == "offline_access"));
    if supported && !scopes.is_empty() && !scopes.iter().any(|s| s == "offline_access") {
        scopes.push("offline_access".to_owned());
    }
}
