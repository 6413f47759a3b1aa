// placeholder, replaced by the loader
namespace looptrace {}
