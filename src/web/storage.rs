//! Browser storage around the model cache: listing and deleting cached models one by one, and
//! the quota check that runs before a download so a load never leaves a half-filled cache
//! behind because storage ran out.

use js_sys::{Array, Reflect};
use serde::Serialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Cache, CacheStorage, Request};

use super::error::js_error;
use crate::loader::cache::{self, EntryKey};
use crate::Error;

fn cache_storage() -> Result<CacheStorage, JsValue> {
    Reflect::get(&js_sys::global(), &"caches".into())?
        .dyn_into()
        .map_err(|_| js_error("UNSUPPORTED", "this context has no Cache API"))
}

async fn open_cache() -> Result<Cache, JsValue> {
    JsFuture::from(cache_storage()?.open(cache::CACHE_NAME)).await?.dyn_into()
}

/// Every entry of the model cache whose key weft wrote, with the request that deletes it.
async fn entries(cache: &Cache) -> Result<Vec<(Request, EntryKey)>, JsValue> {
    let requests: Array = JsFuture::from(cache.keys()).await?.dyn_into()?;
    Ok(requests
        .iter()
        .filter_map(|r| r.dyn_into::<Request>().ok())
        .filter_map(|r| cache::parse_key(&r.url()).map(|k| (r, k)))
        .collect())
}

/// The model files in the cache: `{ url, bytes, coveredBytes, fileBytes, ranges, complete }` each.
#[wasm_bindgen(js_name = cachedModels)]
pub async fn cached_models() -> Result<JsValue, JsValue> {
    let cache = open_cache().await?;
    let keys: Vec<EntryKey> = entries(&cache).await?.into_iter().map(|(_, k)| k).collect();
    let models = cache::summarize(&keys);
    models.serialize(&serde_wasm_bindgen::Serializer::json_compatible()).map_err(|e| js_error("INTERNAL", &e.to_string()))
}

/// Deletes every cached range of `url` (absolute, as given to loadModel), of every version of
/// the file. True when something was deleted.
#[wasm_bindgen(js_name = deleteCachedModel)]
pub async fn delete_cached_model(url: String) -> Result<bool, JsValue> {
    let cache = open_cache().await?;
    let mut deleted = false;
    for (request, key) in entries(&cache).await? {
        if key.url == url {
            deleted |= JsFuture::from(cache.delete_with_request(&request)).await?.as_bool().unwrap_or(false);
        }
    }
    Ok(deleted)
}

/// `navigator.storage.estimate()` as (quota, usage); None where the context has no
/// StorageManager (then nothing can be checked).
async fn estimate() -> Option<(u64, u64)> {
    let navigator = Reflect::get(&js_sys::global(), &"navigator".into()).ok()?;
    let storage = Reflect::get(&navigator, &"storage".into()).ok().filter(|s| s.is_object())?;
    let call: js_sys::Function = Reflect::get(&storage, &"estimate".into()).ok()?.dyn_into().ok()?;
    let promise: js_sys::Promise = call.call0(&storage).ok()?.dyn_into().ok()?;
    let found = JsFuture::from(promise).await.ok()?;
    let number = |key: &str| Reflect::get(&found, &key.into()).ok().and_then(|v| v.as_f64()).map(|n| n.max(0.0) as u64);
    Some((number("quota")?, number("usage").unwrap_or(0)))
}

/// Before a download into the cache: the bytes of `url` (version `validator`, `file_bytes`
/// long) that are not cached yet must fit in the storage the browser still grants, else the
/// load fails with `Error::Quota` before it fetches anything.
/// A cache that cannot be opened or listed counts as holding nothing of the file.
pub(crate) async fn ensure_room(url: &str, validator: &str, file_bytes: u64) -> crate::Result<()> {
    let ranges: Vec<_> = match open_cache().await {
        Ok(cache) => entries(&cache)
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|(_, k)| k.url == url && k.validator == validator)
            .map(|(_, k)| k.range)
            .collect(),
        Err(_) => Vec::new(),
    };
    let needed = cache::bytes_to_cache(file_bytes, cache::covered(&ranges));
    if needed == 0 {
        return Ok(());
    }
    let Some((quota, usage)) = estimate().await else { return Ok(()) };
    match cache::fits_quota(quota, usage, needed) {
        (_, true) => Ok(()),
        (available, false) => Err(Error::Quota { url: url.to_string(), needed, available }),
    }
}
