//! A model folder served over HTTP, each of its files read by its own [`WebReader`].

use super::{LoadError, WebOptions, WebReader};
use crate::Result;

/// A model folder served over HTTP (a Hugging Face repo's `resolve/main/`, a local folder):
/// each file read by its own [`WebReader`], a 404 meaning the folder lacks it.
pub struct WebFolder {
    /// The folder's URL without the trailing slash.
    pub base: String,
    /// The URL's query, if any (`?...`), repeated on every file's URL.
    pub query: String,
    pub options: WebOptions,
}

impl WebFolder {
    /// The folder at `url` when its path ends in `/`; None for a file's URL.
    pub fn parse(url: &str, options: WebOptions) -> Option<Self> {
        let url = url.split('#').next().unwrap_or(url);
        let (path, query) = url.split_once('?').map_or((url, String::new()), |(p, q)| (p, format!("?{q}")));
        path.ends_with('/').then(|| Self { base: path.trim_end_matches('/').to_string(), query, options })
    }
}

impl crate::model::folder::FolderSource for WebFolder {
    type Reader = WebReader;

    fn name(&self) -> &str {
        &self.base
    }

    async fn open(&self, name: &str) -> Result<Option<WebReader>> {
        match WebReader::open(&format!("{}/{name}{}", self.base, self.query), self.options.clone()).await {
            Ok(r) => Ok(Some(r)),
            Err(crate::Error::Load(LoadError::Http { status: Some(404), .. })) => Ok(None),
            Err(e) => Err(e),
        }
    }
}
